#!/usr/bin/env bash
# monitoring-crds.sh copies the Prometheus Operator's ServiceMonitor and
# PrometheusRule CRDs from its Go module into a cache folder outside the
# repository, once per version, and prints the folder. The install tests
# install them so that the API server checks the chart's ServiceMonitor and
# PrometheusRule (server-side dry-run). Go module proxy only; nothing is
# committed.
set -euo pipefail

PROMETHEUS_OPERATOR_VERSION=v0.85.0

cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
dir=$cache/crds/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION
files="monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml"
if [ ! -f "$dir/monitoring.coreos.com_prometheusrules.yaml" ]; then
	printf 'crds: downloading github.com/prometheus-operator/prometheus-operator@%s (first time only)\n' "$PROMETHEUS_OPERATOR_VERSION" >&2
	# Outside any module, so that the download touches no go.mod.
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "crds: no module folder for prometheus-operator" >&2; exit 1; }
	mkdir -p "$dir"
	for f in $files; do
		cp "$mod/example/prometheus-operator-crd/$f" "$dir/$f.tmp"
		chmod 644 "$dir/$f.tmp"
		mv "$dir/$f.tmp" "$dir/$f"
	done
fi
echo "$dir"

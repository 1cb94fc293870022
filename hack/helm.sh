#!/usr/bin/env bash
# helm.sh builds the helm CLI from its Go module (hack/tools/helm pins the
# version), once per version, into a cache outside the repository, and prints
# the path of the binary. A warm run costs nothing.
set -euo pipefail

HELM_VERSION=$(sed -n 's/^require helm.sh\/helm\/v4 \(v[0-9.]*\)$/\1/p' "$(dirname "$0")/tools/helm/go.mod")

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
dir=$cache/helm/$HELM_VERSION
# shellcheck source=hack/cachelock.sh
. "$root/hack/cachelock.sh"
cache_lock "$dir"
if [ ! -x "$dir/helm" ]; then
	printf 'helm: building helm %s (first time only, about 4 minutes on 2 cores)\n' "$HELM_VERSION" >&2
	mkdir -p "$dir"
	(cd "$root/hack/tools/helm" && go build -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
		-o "$dir/helm.tmp" helm.sh/helm/v4/cmd/helm)
	mv "$dir/helm.tmp" "$dir/helm"
fi
echo "$dir/helm"

#!/usr/bin/env bash
# argo-rollouts.sh builds Argo Rollouts' controller (rollouts-controller)
# from its Go module, once per version, into a cache folder outside the
# repository, with the module's CRDs next to it, and prints the folder. The
# e2e tests run it against the local control plane, so that Rollouts are
# rolled by Argo's own controller.
#
# The module is built as its own main module (a copy of its folder), so that
# its go.mod's replace directives apply, as in Argo's own build.
set -euo pipefail

ARGO_ROLLOUTS_VERSION=v1.8.3

cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
dir=$cache/argo-rollouts/$ARGO_ROLLOUTS_VERSION
# shellcheck source=hack/cachelock.sh
. "$(dirname "$0")/cachelock.sh"
cache_lock "$dir"
if [ ! -x "$dir/rollouts-controller" ]; then
	printf 'argo-rollouts: building rollouts-controller %s (first time only; a few minutes)\n' "$ARGO_ROLLOUTS_VERSION" >&2
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "argo-rollouts: no module folder" >&2; exit 1; }
	src=$(mktemp -d)
	trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
	cp -r "$mod/." "$src/"
	chmod -R u+w "$src"
	mkdir -p "$dir/crds"
	(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -o "$dir/rollouts-controller.tmp" ./cmd/rollouts-controller)
	cp "$src"/manifests/crds/*-crd.yaml "$dir/crds/"
	chmod 644 "$dir"/crds/*.yaml
	mv "$dir/rollouts-controller.tmp" "$dir/rollouts-controller"
fi
echo "$dir"

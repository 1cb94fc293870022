#!/usr/bin/env bash
# sealed-secrets.sh builds Bitnami's sealed-secrets controller and its
# kubeseal CLI from their Go module, at the version hack/crds.sh pins for
# the SealedSecret CRD, into a cache folder outside the repository, once
# per version, and prints the folder (holding controller and kubeseal).
# It downloads through the Go module proxy only. The module's go.mod names
# it github.com/bitnami/sealed-secrets while the proxy serves it as
# github.com/bitnami-labs/sealed-secrets: it is built in a copy, as its own
# main module, so that nothing touches watcher's go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^SEALED_SECRETS_VERSION=//p' hack/crds.sh)
cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
dir=$cache/sealed-secrets-$version
# shellcheck source=hack/cachelock.sh
. hack/cachelock.sh
cache_lock "$dir"
if [ ! -x "$dir/controller" ] || [ ! -x "$dir/kubeseal" ]; then
	printf 'sealed-secrets: building the controller and kubeseal %s (first time only, ~2 minutes)\n' "$version" >&2
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/bitnami-labs/sealed-secrets@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "sealed-secrets: no module folder" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
	cp -r "$mod" "$work/src"
	chmod -R u+w "$work/src"
	mkdir -p "$dir"
	(cd "$work/src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$dir/controller.tmp" ./cmd/controller &&
		GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$dir/kubeseal.tmp" ./cmd/kubeseal) >&2
	mv "$dir/controller.tmp" "$dir/controller"
	mv "$dir/kubeseal.tmp" "$dir/kubeseal"
fi
echo "$dir"

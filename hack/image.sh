#!/usr/bin/env bash
# image.sh builds watcher's container image without a container daemon:
# a static binary (CGO off) put on an empty base by hack/image (a Go program
# using go-containerregistry), as an OCI image layout and a tarball.
#
#   hack/image.sh [out-dir]     default bin/image
#
# out-dir/oci is the OCI layout (`crane push out-dir/oci REF`,
# `skopeo copy oci:out-dir/oci docker://REF`); out-dir/watcher.tar loads with
# `docker load -i` or `podman load -i`. Prints the image digest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/image}
mkdir -p "$out"
out=$(cd "$out" && pwd)
arch=$(go env GOARCH)
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$out/watcher" ./cmd/watcher)
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$ca" ]; then
	echo "image: installing ca-certificates from Debian" >&2
	sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ca-certificates >/dev/null
fi
cd "$root/hack/image"
go run . -binary "$out/watcher" -ca-bundle "$ca" -arch "$arch" \
	-layout "$out/oci" -tarball "$out/watcher.tar" -tag "${IMAGE:-ghcr.io/watcher-dev/watcher:latest}"

#!/usr/bin/env bash
# controlplane-bins.sh builds the local control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl and kwok) from Go modules,
# once per version, into a cache outside the repository, and prints the folder.
#
# Every binary that is already in the cache is left alone, so a warm run costs
# nothing. The folder also works as KUBEBUILDER_ASSETS.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.6
KWOK_VERSION=v0.8.0

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
dir=$cache/controlplane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
# shellcheck source=hack/cachelock.sh
. "$root/hack/cachelock.sh"
cache_lock "$dir"

step() { printf 'controlplane: %s\n' "$*" >&2; }

# The Kubernetes binaries report $K8S_VERSION, as a release does (a build
# from source without these says v0.0.0-master, which helm refuses for a
# chart with a kubeVersion).
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
kver="$kver -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # build <binary> <tools module folder> <package> [ldflags]
	local bin=$1 mod=$2 pkg=$3 ldflags=${4:-}
	[ -x "$dir/$bin" ] && ! unstamped "$bin" && return 0
	step "building $bin (first time only; a cold build takes a few minutes)"
	(cd "$root/hack/tools/$mod" && go build -trimpath -ldflags "$ldflags" -o "$dir/$bin.tmp" "$pkg")
	mv "$dir/$bin.tmp" "$dir/$bin"
}

# unstamped tells an API server built before its version was stamped: it
# is built again (a link: its packages are in Go's cache), and replaced at
# once, so that a control plane starting meanwhile finds one or the other.
unstamped() {
	[ "$1" = kube-apiserver ] && [ "$("$dir/$1" --version)" != "Kubernetes $K8S_VERSION" ]
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver "$kver"
build kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager "$kver"
build kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler "$kver"
build kubectl kubernetes k8s.io/kubernetes/cmd/kubectl "$kver"

if [ ! -x "$dir/kwok" ]; then
	step "building kwok"
	GOBIN="$dir/.kwok" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	mv "$dir/.kwok/kwok" "$dir/kwok" && rmdir "$dir/.kwok"
fi
if [ ! -f "$dir/kwok-stages/pod-ready.yaml" ]; then
	# kwok exits with "no stages found" without Stage configs; they ship in its module.
	src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	mkdir -p "$dir/kwok-stages"
	cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
		"$src"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$dir/kwok-stages/"
	chmod u+w "$dir"/kwok-stages/*.yaml
fi
echo "$dir"

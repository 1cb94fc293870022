#!/usr/bin/env bash
# crds.sh copies the CustomResourceDefinitions the tests install from the Go
# modules that ship them into a cache folder outside the repository, once per
# version, and prints the folder. It downloads through the Go module proxy
# only (go mod download); no CRD is ever committed.
#
#   rollout-crd.yaml  Argo Rollouts' Rollout (argoproj.io/v1alpha1)
#
# `hack/crds.sh sealed-secrets` prints instead the folder of
#   sealedsecret-crd.yaml  Bitnami's SealedSecret (bitnami.com/v1alpha1),
# from the sealed-secrets module (the version hack/sealed-secrets.sh builds).
#
# `hack/crds.sh csi` prints instead the folder of
#   secretproviderclasspodstatus-crd.yaml  the Secrets Store CSI Driver's
#   SecretProviderClassPodStatus (secrets-store.csi.x-k8s.io/v1), from the
#   driver's module (its Helm chart's copy).
set -euo pipefail

ARGO_ROLLOUTS_VERSION=v1.8.3
SEALED_SECRETS_VERSION=v0.40.0
CSI_DRIVER_VERSION=v1.6.0

cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
# One lock for the three folders: each is a download of seconds.
# shellcheck source=hack/cachelock.sh
. "$(dirname "$0")/cachelock.sh"
cache_lock "$cache/crds"
dir=$cache/crds/argo-rollouts-$ARGO_ROLLOUTS_VERSION
if [ ! -f "$dir/rollout-crd.yaml" ]; then
	printf 'crds: downloading github.com/argoproj/argo-rollouts@%s (first time only)\n' "$ARGO_ROLLOUTS_VERSION" >&2
	# Outside any module, so that the download touches no go.mod.
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/argoproj/argo-rollouts@$ARGO_ROLLOUTS_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "crds: no module folder for argo-rollouts" >&2; exit 1; }
	mkdir -p "$dir"
	cp "$mod/manifests/crds/rollout-crd.yaml" "$dir/rollout-crd.yaml.tmp"
	chmod 644 "$dir/rollout-crd.yaml.tmp"
	mv "$dir/rollout-crd.yaml.tmp" "$dir/rollout-crd.yaml"
fi
ssdir=$cache/crds/sealed-secrets-$SEALED_SECRETS_VERSION
if [ ! -f "$ssdir/sealedsecret-crd.yaml" ]; then
	printf 'crds: downloading github.com/bitnami-labs/sealed-secrets@%s (first time only)\n' "$SEALED_SECRETS_VERSION" >&2
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/bitnami-labs/sealed-secrets@$SEALED_SECRETS_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "crds: no module folder for sealed-secrets" >&2; exit 1; }
	mkdir -p "$ssdir"
	cp "$mod/helm/sealed-secrets/crds/bitnami.com_sealedsecrets.yaml" "$ssdir/sealedsecret-crd.yaml.tmp"
	chmod 644 "$ssdir/sealedsecret-crd.yaml.tmp"
	mv "$ssdir/sealedsecret-crd.yaml.tmp" "$ssdir/sealedsecret-crd.yaml"
fi
csidir=$cache/crds/secrets-store-csi-driver-$CSI_DRIVER_VERSION
if [ ! -f "$csidir/secretproviderclasspodstatus-crd.yaml" ]; then
	printf 'crds: downloading sigs.k8s.io/secrets-store-csi-driver@%s (first time only)\n' "$CSI_DRIVER_VERSION" >&2
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/secrets-store-csi-driver@$CSI_DRIVER_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "crds: no module folder for secrets-store-csi-driver" >&2; exit 1; }
	mkdir -p "$csidir"
	cp "$mod/charts/secrets-store-csi-driver/crds/secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml" "$csidir/secretproviderclasspodstatus-crd.yaml.tmp"
	chmod 644 "$csidir/secretproviderclasspodstatus-crd.yaml.tmp"
	mv "$csidir/secretproviderclasspodstatus-crd.yaml.tmp" "$csidir/secretproviderclasspodstatus-crd.yaml"
fi
case "${1:-}" in
sealed-secrets) echo "$ssdir" ;;
csi) echo "$csidir" ;;
*) echo "$dir" ;;
esac

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
#
# `hack/crds.sh external-secrets` prints instead the folder of
#   externalsecret-crd.yaml  External Secrets' ExternalSecret
#   (external-secrets.io/v1 and v1beta1), from the module's
#   config/crds/bases (plain YAML, no Helm template).
#
# `hack/crds.sh cert-manager` prints instead the folder of
#   certificate-crd.yaml  cert-manager's Certificate (cert-manager.io/v1),
#   from the module's deploy/crds (plain YAML, no Helm template).
#
# These two modules are large: each is downloaded only when asked for.
set -euo pipefail

ARGO_ROLLOUTS_VERSION=v1.8.3
SEALED_SECRETS_VERSION=v0.40.0
CSI_DRIVER_VERSION=v1.6.0
EXTERNAL_SECRETS_VERSION=v0.16.2
CERT_MANAGER_VERSION=v1.19.1

cache=${WATCHER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/watcher}
# One lock for every folder: each is a download of seconds.
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
# copy_crd <module@version> <path in module> <folder> <file>: copies one CRD
# from a module into the cache, once.
copy_crd() {
	[ -f "$3/$4" ] && return 0
	printf 'crds: downloading %s (first time only)\n' "$1" >&2
	local mod
	mod=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$1" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$mod" ] || { echo "crds: no module folder for $1" >&2; exit 1; }
	mkdir -p "$3"
	cp "$mod/$2" "$3/$4.tmp"
	chmod 644 "$3/$4.tmp"
	mv "$3/$4.tmp" "$3/$4"
}
case "${1:-}" in
external-secrets)
	esdir=$cache/crds/external-secrets-$EXTERNAL_SECRETS_VERSION
	copy_crd "github.com/external-secrets/external-secrets@$EXTERNAL_SECRETS_VERSION" \
		config/crds/bases/external-secrets.io_externalsecrets.yaml "$esdir" externalsecret-crd.yaml
	echo "$esdir"
	;;
cert-manager)
	cmdir=$cache/crds/cert-manager-$CERT_MANAGER_VERSION
	copy_crd "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" \
		deploy/crds/cert-manager.io_certificates.yaml "$cmdir" certificate-crd.yaml
	echo "$cmdir"
	;;
sealed-secrets) echo "$ssdir" ;;
csi) echo "$csidir" ;;
*) echo "$dir" ;;
esac

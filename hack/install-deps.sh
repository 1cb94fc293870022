#!/usr/bin/env bash
# install-deps.sh installs what the tests need that a fresh machine lacks:
# redis-server from Debian's packages, and the control-plane binaries (built
# from Go modules into a cache, once per version), and the CRDs the
# integration tests install (hack/crds.sh), and Argo Rollouts' controller
# that the e2e tests run (hack/argo-rollouts.sh), and the sealed-secrets
# controller and kubeseal the end-to-end tests run (hack/sealed-secrets.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
	echo "install-deps: installing redis-server from Debian" >&2
	sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi
hack/controlplane-bins.sh >/dev/null
hack/crds.sh >/dev/null
hack/crds.sh external-secrets >/dev/null
hack/crds.sh cert-manager >/dev/null
hack/argo-rollouts.sh >/dev/null
# The install tests (test/install): the helm CLI and the Prometheus
# Operator's CRDs.
hack/helm.sh >/dev/null
hack/monitoring-crds.sh >/dev/null
hack/sealed-secrets.sh >/dev/null

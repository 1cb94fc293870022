# watcher's make targets. `make help` lists them.
SHELL := bash
GO ?= go
# The control-plane binaries, built once per version into a cache folder.
CONTROLPLANE = $(shell hack/controlplane-bins.sh)
# staticcheck, run by `go run` at this version (built once into Go's cache):
# nothing to install. Its version must support the Go of go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# controller-gen, run by `go run` at this version like staticcheck: it writes
# the CRDs and deepcopy code of api/. Its k8s.io modules should match go.mod's.
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# gci, run by `go run` like staticcheck: `make lint` fails on imports not in
# three groups (standard library, third party, this module), in that order.
GCI ?= github.com/daixiang0/gci@v0.14.0
GCI_SECTIONS = -s standard -s default -s "prefix(github.com/watcher-dev/watcher)" --skip-generated
# How much `make fuzz` runs each fuzz test: a count of inputs, not a duration.
# Go 1.26's fuzz coordinator can fail a duration-bounded run with "context
# deadline exceeded" and no failing input when its deadline races a busy
# worker (golang/go#75804, fixed in Go 1.27); a count sets no deadline.
FUZZTIME ?= 20000x

.PHONY: help build test unit integration e2e install-tests lint imports fuzz history demo run bench controlplane deps clean generate verify-generate
.PHONY: manifests verify-manifests image

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/watcher
	@echo "build: bin/watcher (the first build downloads Go modules)"
	@$(GO) build -o bin/watcher ./cmd/watcher

test: build deps image ## run every test: unit, integration, end-to-end, install and fuzz (installs what they need first)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) WATCHER_BIN=$(CURDIR)/bin/watcher $(GO) test -race -count=1 -timeout 45m ./...
	@$(MAKE) --no-print-directory fuzz

# The unit tests start no process. A test that starts one lives under
# test/integration, unless its package cannot be imported from there (a
# main package): then it is named here, skipped by `make unit` and run by
# `make integration`.
UNIT = ./internal/... ./cmd/... ./hack/bench/ ./test/docs/ ./test/fixture/
PROCESS_TESTS = ^TestControllerProcess$$

unit: ## run the unit tests only: they start no process (no control plane, no redis-server, no script)
	$(GO) test -race -count=1 -skip '$(PROCESS_TESTS)' $(UNIT)

integration: deps ## run the integration tests only (a real kube-apiserver and etcd, watcher in the test process; redis-server, the local control plane and the scripts of hack/ for the packages they test)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) $(GO) test -race -count=1 -timeout 30m ./test/integration/...
	$(GO) test -race -count=1 -run '$(PROCESS_TESTS)' ./hack/bench/

e2e: build deps ## run the end-to-end tests only (the built binary on a whole local control plane with kwok nodes)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) WATCHER_BIN=$(CURDIR)/bin/watcher $(GO) test -race -count=1 -timeout 45m ./test/e2e/...

install-tests: build deps image ## run the install tests only (the Helm chart, the one-file manifests and the image)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) WATCHER_BIN=$(CURDIR)/bin/watcher $(GO) test -race -count=1 -timeout 30m ./test/install/...

lint: ## gofmt, import grouping (gci), go vet and staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@bad=$$($(GO) run $(GCI) list $(GCI_SECTIONS) $$(git ls-files '*.go')) || exit 1; \
		test -z "$$bad" || { echo "$$bad"; echo "imports not grouped (standard, third party, this module): run make imports"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

imports: ## group the imports of every Go file: standard library, third party, this module
	$(GO) run $(GCI) write $(GCI_SECTIONS) $$(git ls-files '*.go')

generate: ## regenerate the CRDs (deploy/crds/) and deepcopy code from the types of api/
	$(GO) run $(CONTROLLER_GEN) object paths=./api/... crd output:crd:dir=deploy/crds

# verify-generate regenerates in a copy of the tree (CRDs from scratch, so a
# removed one shows too) and diffs: CI fails when api/ changed without
# `make generate`. The working tree is left alone.
verify-generate: ## fail if `make generate` would change api/ or deploy/crds/
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tar -c --exclude=./.git --exclude=./bin . | tar -x -C "$$tmp"; \
	rm -f "$$tmp"/deploy/crds/*.yaml; \
	$(MAKE) --no-print-directory -C "$$tmp" generate >/dev/null; \
	diff -r api "$$tmp/api" && diff -r deploy/crds "$$tmp/deploy/crds" || \
		{ echo "verify-generate: generated files are stale: run make generate"; exit 1; }

manifests: ## regenerate the chart's CRDs (from deploy/crds/) and deploy/manifests/watcher.yaml (the chart with default values)
	@hack/manifests.sh

# verify-manifests regenerates in a copy of the tree and diffs, like
# verify-generate: CI fails when the chart or deploy/crds/ changed without
# `make manifests`.
verify-manifests: ## fail if `make manifests` would change deploy/helm/watcher/crds/ or deploy/manifests/
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tar -c --exclude=./.git --exclude=./bin . | tar -x -C "$$tmp"; \
	rm -f "$$tmp"/deploy/helm/watcher/crds/*.yaml "$$tmp"/deploy/manifests/*.yaml; \
	"$$tmp"/hack/manifests.sh; \
	diff -r deploy/helm/watcher/crds "$$tmp/deploy/helm/watcher/crds" && diff -r deploy/manifests "$$tmp/deploy/manifests" || \
		{ echo "verify-manifests: generated files are stale: run make manifests"; exit 1; }

image: ## build the container image without a daemon: bin/image/oci (OCI layout) and bin/image/watcher.tar
	@hack/image.sh

# Go fuzzes one target per `go test` call: every `func FuzzX` of a _test.go
# file is found and run in turn. A failing input is saved under the
# package's testdata/fuzz/FuzzX, where `go test` replays it from then on.
history: ## run the history simulation of the controller long: WATCHER_HISTORIES=2000 histories from WATCHER_HISTORY_SEED (default random)
	WATCHER_HISTORY_SEED=$${WATCHER_HISTORY_SEED:-random} WATCHER_HISTORIES=$${WATCHER_HISTORIES:-2000} go test -run TestHistorySimulation -count=1 -timeout 60m ./internal/controller/

fuzz: ## run every fuzz test (func FuzzX) for FUZZTIME inputs each, default 20000x
	@grep -rEo --include='*_test.go' --exclude-dir=.git '^func Fuzz[A-Za-z0-9_]+' . | sort | \
	while IFS=: read -r file fn; do \
		fn=$${fn#func }; pkg=./$$(dirname "$${file#./}"); \
		echo "fuzz: $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$pkg" || exit 1; \
	done

deps: ## install what the tests need and a fresh machine lacks: redis-server (Debian), the control plane
	@hack/install-deps.sh

controlplane: ## build etcd, kube-apiserver, controller-manager, scheduler, kubectl and kwok if missing
	@echo "controlplane: checking the control-plane binaries (built once, ~10 minutes cold)"
	@hack/controlplane-bins.sh >/dev/null

demo: build controlplane ## start a local control plane, run watcher on it and show a restart
	@echo "demo: building the demo"
	@$(GO) build -o bin/demo ./hack/demo
	@bin/demo --watcher bin/watcher

run: build ## run watcher against the cluster of $$KUBECONFIG
	bin/watcher --local-config=True

bench: build controlplane ## measure reaction latency, memory, CPU and API requests at scale; again with 2,000 ReloadPolicies; then the eviction scenario, evict beside annotation; then 1,000 blocked evict restarts, from the leader and a restarted leader; then pinned restarts beside unpinned ones
	$(GO) run ./hack/bench --watcher bin/watcher
	$(GO) run ./hack/bench --watcher bin/watcher --policies 2000
	$(GO) run ./hack/bench --watcher bin/watcher --shared 20 --replicas 3 --pdb --strategy evict
	$(GO) run ./hack/bench --watcher bin/watcher --shared 20 --replicas 3 --pdb --strategy annotation
	$(GO) run ./hack/bench --watcher bin/watcher --blocked 1000 --after 11m --restarted-after 10m --window 1m
	$(GO) run ./hack/bench --watcher bin/watcher --pinned --workloads 200 --changes 100 --rate 2

clean: ## remove bin/
	rm -rf bin

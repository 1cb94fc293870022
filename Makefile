# watcher's make targets. `make help` lists them.
SHELL := bash
GO ?= go
# The control-plane binaries, built once per version into a cache folder.
CONTROLPLANE = $(shell hack/controlplane-bins.sh)

.PHONY: help build test unit lint demo run bench controlplane deps clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/watcher
	@echo "build: bin/watcher (the first build downloads Go modules)"
	@$(GO) build -o bin/watcher ./cmd/watcher

test: build deps ## run every test: unit, integration and end-to-end (installs what they need first)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) WATCHER_BIN=$(CURDIR)/bin/watcher $(GO) test -race -count=1 -timeout 45m ./...

unit: ## run the unit tests only (no control plane)
	$(GO) test -race -count=1 ./internal/...

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

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

bench: build controlplane ## measure reaction latency, memory, CPU and API requests at scale
	$(GO) run ./hack/bench --watcher bin/watcher

clean: ## remove bin/
	rm -rf bin

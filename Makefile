# watcher's make targets. `make help` lists them.
SHELL := bash
GO ?= go
# The control-plane binaries, built once per version into a cache folder.
CONTROLPLANE = $(shell hack/controlplane-bins.sh)
# staticcheck, run by `go run` at this version (built once into Go's cache):
# nothing to install. Its version must support the Go of go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# How long `make fuzz` runs each fuzz test.
FUZZTIME ?= 10s

.PHONY: help build test unit lint fuzz demo run bench controlplane deps clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/watcher
	@echo "build: bin/watcher (the first build downloads Go modules)"
	@$(GO) build -o bin/watcher ./cmd/watcher

test: build deps ## run every test: unit, integration, end-to-end and fuzz (installs what they need first)
	KUBEBUILDER_ASSETS=$(CONTROLPLANE) WATCHER_BIN=$(CURDIR)/bin/watcher $(GO) test -race -count=1 -timeout 45m ./...
	@$(MAKE) --no-print-directory fuzz

unit: ## run the unit tests only (no control plane)
	$(GO) test -race -count=1 ./internal/...

lint: ## gofmt, go vet and staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Go fuzzes one target per `go test` call: every `func FuzzX` of a _test.go
# file is found and run in turn. A failing input is saved under the
# package's testdata/fuzz/FuzzX, where `go test` replays it from then on.
fuzz: ## run every fuzz test (func FuzzX) for FUZZTIME each, default 10s
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

bench: build controlplane ## measure reaction latency, memory, CPU and API requests at scale
	$(GO) run ./hack/bench --watcher bin/watcher

clean: ## remove bin/
	rm -rf bin

# Phalanx make targets. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
# Pinned code generators, installed into ./bin by `make tools` (not go.mod
# tool dependencies: buf's dependency graph conflicts with ours).
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
# Pinned linter (.golangci.yml), installed into ./bin by `make tools`.
GOLANGCI_LINT_VERSION := v2.15.0

FUZZTIME ?= 10s

# Import rules `make check` enforces: the measurement data path and the
# coordinator do not link the load engine; the pure packages do not link gRPC.
NO_ENGINE_PKGS := coordinator internal/wire internal/merge internal/report internal/hist internal/plan internal/measure internal/store internal/threshold
NO_GRPC_PKGS := internal/merge internal/report internal/hist internal/plan internal/measure internal/threshold
# The load engine and the pure packages do not link the Prometheus client
# (internal/metrics, the daemons', reads their results).
NO_PROMETHEUS_PKGS := internal/engine internal/merge internal/report internal/hist internal/plan internal/measure internal/wire

# Version stamped into the binaries by `make build` (internal/version);
# override with `make build VERSION=v1.2.3`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/phalanxload/phalanx/internal/version.Version=$(VERSION) \
	-X github.com/phalanxload/phalanx/internal/version.Commit=$(COMMIT)

.PHONY: help build release test test-cases test-netns test-short fuzz demo proto tools lint check bench bench-profile bench-memory clean

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build agent, coordinator and coordctl into ./bin, stamped with VERSION and COMMIT
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/agent ./cmd/coordinator ./cmd/coordctl

release: ## cross-build static binaries (linux amd64, arm64) stamped with VERSION and COMMIT into dist/: a tarball per platform (bin/, README, systemd units) and SHA256SUMS
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' OUT='$(CURDIR)/dist' bash deploy/release.sh

test: ## run every test with the race detector (the 0-RTT ones again without it: quic-go issue 4303), and the deploy module's manifest checks, then say whether the NGINX e2e tests ran (they need nginx installed)
	@status=0; go test -race -count=1 -timeout 30m ./... || status=$$?; \
	  go test -count=1 -run 'EarlyData' ./internal/engine ./e2e ./cmd/coordctl || status=$$?; \
	  (cd deploy && go test -count=1 ./...) || status=$$?; go run ./e2e/internal/nginxstatus; exit $$status

test-cases: ## run the field-case tests without the race detector, where their timing criteria are judged
	go test -count=1 -timeout 20m -run '^TestCase' ./e2e

test-netns: ## run the multi-host test in network namespaces, alone (root; needs the cores to itself)
	PHALANX_NETNS=1 PHALANX_REQUIRE_NETNS=1 go test -count=1 -run '^TestNetnsCluster$$' -v ./e2e

test-short: ## run the tests without the race detector
	go test -count=1 -timeout 30m ./...

fuzz: ## run each fuzz target briefly (FUZZTIME, default 10s)
	.ci/fuzz ./internal/http1 FuzzReadResponse $(FUZZTIME)
	.ci/fuzz ./internal/plan FuzzParseMix $(FUZZTIME)
	.ci/fuzz ./internal/plan FuzzParseFile $(FUZZTIME)
	.ci/fuzz ./internal/hist FuzzDecodeSparse $(FUZZTIME)
	.ci/fuzz ./internal/allow FuzzParse $(FUZZTIME)
	.ci/fuzz ./agent FuzzSetup $(FUZZTIME)
	.ci/fuzz ./coordinator FuzzInterval $(FUZZTIME)
	.ci/fuzz ./coordinator FuzzUnmarshalAliased $(FUZZTIME)

demo: ## run the in-process demo (built-in target, coordinator, 2 agents)
	go run ./cmd/coordctl demo

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/golangci-lint ## install the pinned protobuf generators and linter into ./bin

$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/golangci-lint:
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

proto: tools ## lint the .proto files and regenerate the committed Go code
	$(BIN)/buf lint
	$(BIN)/buf generate

lint: $(BIN)/golangci-lint ## gofmt, go vet and golangci-lint (.golangci.yml: staticcheck, unused, errcheck, govet, ineffassign)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	cd deploy && go vet ./...
	$(BIN)/golangci-lint run --allow-serial-runners ./...

check: lint proto ## lint, regenerate protobuf code and fail on drift, untidy go.mod or forbidden imports
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@cd deploy && go mod tidy -diff || { echo "deploy/go.mod/go.sum are not tidy: run go mod tidy in deploy/"; exit 1; }
	@git diff --exit-code -- proto || { echo "generated code drifted: commit the output of make proto"; exit 1; }
	@bad=$$(go list -deps ./internal/engine | grep -E 'google.golang.org/(grpc|protobuf)' || true); \
	if [ -n "$$bad" ]; then echo "internal/engine must not import gRPC or protobuf: $$bad"; exit 1; fi
	@if go list -deps ./agent | grep -qx 'github.com/phalanxload/phalanx/coordinator' || \
	    go list -deps ./coordinator | grep -qx 'github.com/phalanxload/phalanx/agent'; then \
	  echo "agent and coordinator must not import each other (they meet in proto)"; exit 1; fi
	@for p in $(NO_ENGINE_PKGS); do \
	  if go list -deps ./$$p | grep -qx 'github.com/phalanxload/phalanx/internal/engine'; then \
	    echo "$$p must not import internal/engine"; exit 1; fi; done
	@for p in $(NO_GRPC_PKGS); do \
	  bad=$$(go list -deps ./$$p | grep -E '^google.golang.org/grpc(/|$$)' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import gRPC: $$bad"; exit 1; fi; done
	@for p in $(NO_PROMETHEUS_PKGS); do \
	  bad=$$(go list -deps ./$$p | grep -E '^github.com/prometheus/' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import the Prometheus client: $$bad"; exit 1; fi; done

bench: ## compare the agent with wrk/h2load side by side (needs root for apt; writes bench-results/)
	bash bench/run.sh

bench-profile: ## make bench, plus the agent's CPU and allocation profiles per scenario
	BENCH_PROFILE=1 bash bench/run.sh

bench-memory: ## the agent's RSS over 10 million keep-alive requests (BENCH_RSS_REQUESTS to change)
	BENCH_RSS_REQUESTS=$${BENCH_RSS_REQUESTS:-10000000} bash bench/run.sh

clean: ## remove build output
	rm -rf $(BIN) dist

# kubectl-dbops developer tasks. Needs only Go and make (git for the version).
#
#   make build        bin/kubectl-dbops
#   make test         THE test command: vet, gofmt check, unit tests, mutation check, test bed, e2e tests
#   make mutate       every mutant of hack/mutate/mutants.txt (each safety check disabled in turn)
#   make demo         sandbox control plane + a real rolling restart with live progress
#   make help         list every target

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
MODULE   := github.com/kubectl-dbops/kubectl-dbops
BIN_DIR  := bin
BINARY   := $(BIN_DIR)/kubectl-dbops

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
DATE     ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS  := -X $(MODULE)/internal/commands.Version=$(VERSION) \
            -X $(MODULE)/internal/commands.Commit=$(COMMIT) \
            -X $(MODULE)/internal/commands.Date=$(DATE)

# staticcheck 2026.2.2; supports Go 1.26 (module go 1.26.0).
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# e2e packages run one at a time: each starts its own control plane (2 cores).
E2E_PKGS    ?= ./test/e2e/... ./test/testbed/...
# go test's -timeout per package, a guard against a hang: test/e2e took 2609 s (warm, 2-core
# machine, 2026-11-29); e2esummary names the slowest tests.
E2E_TIMEOUT ?= 75m
# E2E_RACE=-race also race-builds the e2e test binaries; E2E_RACE_CHILDREN lists the programs
# they build with -race (racebuild.ChildrenEnv; "all" or empty). See the e2e target.
E2E_RACE    ?=
E2E_RACE_CHILDREN ?= kubectl-dbops,crash-shim
TESTBED_BUILD := bash hack/testbed/build.sh
# Debian packages of the real kubelet nodes (containerd, runc, CNI plugins, busybox-static);
# installs only what is missing, and only as root (else the real-node e2e tests skip, saying why).
TESTBED_DEPS  := bash hack/testbed/realnode-deps.sh
# REAL=1: sandbox and demo with real kubelet nodes and an etcd cluster in containers on them.
REAL ?=
SANDBOX_UP := ./hack/sandbox up$(if $(REAL), --real-nodes)

# Lists every .go file of the repository, build tags or not (gofmt ignores tags).
FIND_GO := find . -name '*.go' -not -path './.git/*' -not -path './vendor/*' -not -path './dist/*' -not -path '*/testdata/*'

.PHONY: all build install test unit e2e testbed vet fmtcheck fmt lint staticcheck \
        docs completions man bench bench-fleet sandbox sandbox-down demo clean help mutate mutate-sample

all: build

## build: compile bin/kubectl-dbops with version information
build:
	$(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BINARY) ./cmd/kubectl-dbops

## install: go install kubectl-dbops into $(go env GOPATH)/bin with version information
install:
	$(GO) install -trimpath -ldflags '-s -w $(LDFLAGS)' ./cmd/kubectl-dbops

## test: go vet, gofmt check, unit tests (incl. stale docs), then the test bed and e2e tests
# One after the other even under make -j: e2e only once everything else passed.
test:
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory fmtcheck
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory mutate-sample
	@$(MAKE) --no-print-directory e2e

## unit: unit tests only (no test bed), with the race detector
# -race costs little here (measured 2026-11-27 on the 2-core dev machine, load ~8: go test
# ./... -count=1 1m21s warm; with -race 2m03s warm, 13m31s with a cold build cache), so
# the unit tests stay a small part of make test (whose e2e tests dominate: see e2e below).
# Through e2esummary (as e2e): a package that hangs until go test's -timeout prints a goroutine
# dump longer than a CI log's tail; the summary's last lines name the tests that did not finish.
unit:
	@$(GO) build -o $(BIN_DIR)/e2esummary ./hack/e2esummary
	$(GO) test -race -json ./... -count=1 | $(BIN_DIR)/e2esummary -label unit

## e2e: build the test bed binaries (first time: several minutes), then the e2e tests; the CLI under the race detector
# go test -json through hack/e2esummary: prints go test's own ok/FAIL lines and failed tests'
# output as a plain run would, then how many tests ran and were skipped, and why.
# Race detector (internal/racebuild): every kubectl-dbops process the e2e tests start, and the
# crash shim, are built with -race (E2E_RACE_CHILDREN); a race the CLI reports fails its test.
# The e2e test binary (with the simulators and the stand-in operator inside it) and the fdbcli
# shim are not: measured 2026-11-28 on the 2-core machine (load 5-8, warm cache) on
# TestFoundationDBRestartByProcessZone + TestFoundationDBRestartInterrupted +
# TestCrateDBRollingRestart + TestEtcdRollingRestart: 91 s plain, 181 s with the CLI and both
# shims race-built, 186 s with the test binary too; the FoundationDB tests alone: 35 s plain,
# 48 s with only the CLI race-built, 120 s with the fdbcli shim too (it starts for every
# fdbcli exec). The whole suite with everything race-built is about 50 min warm, so a cold CI
# run would overrun its 90 minutes; the simulators, the stand-in operator and the fdbcli shim
# run under -race in `make unit` instead (their unit tests). Everything race-built:
# make e2e E2E_RACE=-race E2E_RACE_CHILDREN=all. Not the real nodes' image programs (pause,
# crash shim, CrateDB pod proxy): static CGO_ENABLED=0 builds, and -race needs cgo.
# realnodecheck fails where real nodes are required (CI=true) but cannot run; the e2e tests
# still run, and the target fails at the end.
E2E_SUMMARY := $(BIN_DIR)/e2esummary
e2e: testbed
	@realnodes=0; $(GO) run ./hack/testbed/realnodecheck || realnodes=$$?; \
	$(GO) build -o $(E2E_SUMMARY) ./hack/e2esummary; \
	echo "DBOPS_E2E_RACE_CHILDREN=$(E2E_RACE_CHILDREN) $(GO) test $(E2E_RACE) -json -tags e2e -p 1 $(E2E_PKGS) -count=1 -timeout $(E2E_TIMEOUT) | $(E2E_SUMMARY)"; \
	DBOPS_E2E_RACE_CHILDREN=$(E2E_RACE_CHILDREN) $(GO) test $(E2E_RACE) -json -tags e2e -p 1 $(E2E_PKGS) -count=1 -timeout $(E2E_TIMEOUT) | $(E2E_SUMMARY); \
	if [ "$$realnodes" != 0 ]; then echo "make e2e: real nodes are required here but unavailable (see realnodecheck above)" >&2; exit 1; fi

## mutate: disable each safety check of hack/mutate/mutants.txt in turn; each must fail its tests
# go test -overlay: the work tree is never modified. Prints the kill rate; fails on a survivor
# or on an entry that does not apply or compile.
mutate:
	$(GO) run ./hack/mutate

## mutate-sample: make test's part of the mutation check: MUTATE_SAMPLE mutants drawn with a printed seed (all while the list is no longer)
# 26 mutants took about 3 minutes on the 2-core dev machine under load (2026-11-28): the whole
# list fits make test's budget of about 6 minutes. MUTATE_SEED=N repeats a draw.
MUTATE_SAMPLE ?= 30
MUTATE_SEED   ?= 0
mutate-sample:
	$(GO) run ./hack/mutate -sample $(MUTATE_SAMPLE) -seed $(MUTATE_SEED)

## testbed: install the real nodes' Debian packages if missing, build (or find cached) kube-apiserver, kubelet, etcd, kwok, CoreDNS...
testbed:
	$(TESTBED_DEPS)
	$(TESTBED_BUILD)

## vet: go vet, with and without the e2e build tag
vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...

## fmtcheck: fail listing files gofmt would change
fmtcheck:
	@files="$$($(FIND_GO) -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$files" ]; then \
		echo "gofmt: these files are not formatted (run: make fmt):" >&2; \
		echo "$$files" >&2; \
		exit 1; \
	fi

## fmt: gofmt -w every Go file
fmt:
	$(FIND_GO) -print0 | xargs -0 gofmt -w

## lint: gofmt check, go vet, staticcheck
lint: fmtcheck vet staticcheck

staticcheck:
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags e2e ./test/... ./test/testbed/...

## completions: regenerate completions/ (and man pages and docs/reference/)
completions: docs
	@:
## man: regenerate docs/man/ (and completions and docs/reference/)
man: docs
	@:

docs:
	$(GO) run ./hack/gendocs

## bench: run the benchmarks of internal/...
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

## bench-fleet: the scale benchmarks of issue 39 item 5 on the test bed (a third control plane; about 7 minutes)
# Not part of make test: a fleet list over 3 control planes, status of a 1,000-pod cluster,
# the API requests of a 1,000-pod restart (e2e build tag), and a fleet's memory per target.
# BENCH_FLEET_TIME=5x repeats each e2e benchmark (the restart takes about 3 minutes a run).
BENCH_FLEET_TIME ?= 1x
bench-fleet:
	$(TESTBED_BUILD)
	$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkFleetList|BenchmarkStatus1000|BenchmarkRestartRequests1000' -benchtime $(BENCH_FLEET_TIME) -timeout 40m ./test/e2e
	$(GO) test -run '^$$' -bench BenchmarkFleetMemory -benchtime 3x ./internal/commands

## sandbox: start a local control plane with demo clusters in the background (REAL=1: with real nodes); prints export KUBECONFIG=...
sandbox:
	$(GO) run $(SANDBOX_UP)

## sandbox-down: stop the sandbox and delete its state
sandbox-down:
	$(GO) run ./hack/sandbox down

## demo: sandbox up, build, then a real rolling restart of demo/web (REAL=1: of etcd in containers on real nodes) with live progress
DEMO_CLUSTER := $(if $(REAL),etcd -n rn-etcd,web -n demo)
demo:
	@out="$$($(GO) run $(SANDBOX_UP))"; \
	printf '%s\n' "$$out"; \
	kubeconfig="$$(printf '%s\n' "$$out" | sed -n 's/^export KUBECONFIG=//p' | tail -n 1)"; \
	if [ -z "$$kubeconfig" ]; then echo "make demo: the sandbox printed no KUBECONFIG" >&2; exit 1; fi; \
	$(MAKE) --no-print-directory build; \
	export KUBECONFIG="$$kubeconfig"; \
	set -x; \
	./$(BINARY) status $(DEMO_CLUSTER); \
	./$(BINARY) restart $(DEMO_CLUSTER) --rolling --yes; \
	./$(BINARY) status $(DEMO_CLUSTER); \
	{ set +x; } 2>/dev/null; \
	echo; \
	echo "# The sandbox keeps running. Try it yourself:"; \
	echo "export KUBECONFIG=$$kubeconfig"; \
	echo "# stop it with: make sandbox-down"

## clean: remove build outputs and coverage files
clean:
	rm -rf $(BIN_DIR) dist coverage.out coverage.html *.coverprofile

## help: list targets
help:
	@awk '/^## /{ sub(/^## /, ""); i = index($$0, ":"); printf "  %-14s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2) }' $(MAKEFILE_LIST)

# converge: run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...
BIN   := bin

.PHONY: help demo build test test-full compat ci-time lint fmt vet staticcheck bench fuzz assets chaos zoo explore kind-chaos kwok-cluster kwok-chaos clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

demo: build ## the scenario catalogue on the fake backend (no cluster, no binaries); prints where the HTML report is
	@rm -rf $(BIN)/demo
	$(BIN)/converge run --backend fake --seeds 1 --report $(BIN)/demo --junit $(BIN)/demo/junit.xml

chaos: build assets ## the scenario catalogue on envtest (a real kube-apiserver, etcd and kube-controller-manager)
	@rm -rf $(BIN)/chaos
	$(BIN)/converge run --backend envtest --seeds 1 --report $(BIN)/chaos --junit $(BIN)/chaos/junit.xml

zoo: assets ## the bug zoo: every mutant against the fake catalogue and on envtest, the scaler over 200 seeds of each scenario that caught one, and every mutant explored in every world; writes bin/zoo
	@rm -rf $(BIN)/zoo && mkdir -p $(BIN)/zoo
	$(GO) test ./zoo -count=1 -run '^(TestZoo|TestExamples|TestExplore)$$' -v -timeout 90m -zoo.alarms=200 -zoo.envtest -zoo.explore-all -zoo.explore-seeds=3 -zoo.report $(CURDIR)/$(BIN)/zoo 2>$(BIN)/zoo/controllers.log
	@echo "table:  $(BIN)/zoo/zoo.md"
	@echo "report: $(BIN)/zoo/index.html"

explore: build ## explore the scaler's baseline: one fault at each point of a fault-free run, judged by difference; writes bin/explore
	@rm -rf $(BIN)/explore
	$(BIN)/converge explore baseline --report $(BIN)/explore

build: ## build the binaries and the compiled scenario tests into bin/
	$(GO) build -o $(BIN)/ ./cmd/...
	$(GO) test -c -o $(BIN)/converge-scenarios.test ./scenarios

# Test binaries at a time: one more than the cores, as the envtest and
# kwok runs wait in real time for much of theirs (on 2 cores, 3 at a time
# kept the cores 91% busy through the tests, by vmstat).
NPROC    := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
TESTPARA ?= $(shell echo $$(($(NPROC) + 1)))
# TESTFLAGS go to go test as well (hack/ci-time.sh passes -json).
TESTFLAGS ?=
# The slowest packages first: go test starts them first, so that two run
# side by side to the end rather than one alone at the tail: in the
# presubmit, without the race detector, cmd/converge and the envtest
# runs; in the nightly, the zoo.
ifeq ($(PKGS),./...)
TESTPKGS ?= ./cmd/converge ./scenarios ./examples/mirror ./sim/envtest ./sim ./scenarios/scenariotest ./zoo ./examples/webapp ./chaos ./...
FULLPKGS ?= ./zoo ./scenarios ./examples/mirror ./examples/webapp ./cmd/converge ./sim ./chaos ./...
else
TESTPKGS ?= $(PKGS)
FULLPKGS ?= $(PKGS)
endif

# with-staticcheck runs its command with staticcheck beside it, at the
# lowest priority while the command runs (hack/with-staticcheck.sh says
# why and how).
define with-staticcheck
	@mkdir -p $(BIN)/test-output
	@MAKE="$(MAKE)" RACE="$(RACE)" hack/with-staticcheck.sh $(BIN)/staticcheck.log $(1)
endef

# go test's own vet is off: vet has run on every package already.
# The presubmit builds without the race detector and the nightly with it.
# Under -race the presubmit's tests took twice the cores' time (3,867 s of
# package time against 1,877 on 2 cores, the zoo 513 s against 54), which
# put a fresh machine over the presubmit's budget; the nightly runs every
# test, the presubmit's too, with it.
test: RACE :=
test-full: RACE := -race
# The presubmit links its test binaries without the symbol table and DWARF
# (-s, which implies -w; stack traces read the pclntab, which stays): a
# third less work per link (the scenarios tests: 17 s of CPU rather than
# 24), over 40 test binaries and the binaries the tests build (the scenario
# catalogue's tests, a user's module, the CLI). Nor does its compiler write
# DWARF, in go vet, staticcheck, go test and the go commands the tests start
# alike (GOFLAGS reaches them all, so they share one build cache): a
# seventh less of every compile (cmd/converge from an empty cache: 237 s
# rather than 275). The nightly keeps both, for a debugger.
test: export GOFLAGS := $(strip $(GOFLAGS) -gcflags=all=-dwarf=false -ldflags=-s)

test: assets vet ## presubmit (what CI runs): gofmt, go vet, staticcheck and the -short tier, envtest and kwok runs included
	$(call with-staticcheck,$(GO) test -short -vet=off -p $(TESTPARA) -count=1 -timeout 30m -artifacts -outputdir $(CURDIR)/$(BIN)/test-output $(TESTFLAGS) $(TESTPKGS))

test-full: assets vet ## nightly: gofmt, go vet, staticcheck and every test with the race detector, the full matrix of catalogue, profiles and backends in real time; then make compat
	$(call with-staticcheck,$(GO) test $(RACE) -vet=off -p $(TESTPARA) -count=1 -timeout 150m -artifacts -outputdir $(CURDIR)/$(BIN)/test-output $(TESTFLAGS) $(FULLPKGS))
	hack/compat.sh

compat: assets ## the -short tier against controller-runtime v0.23, v0.24 and v0.25, each with its k8s.io modules; logs in bin/compat
	hack/compat.sh

ci-time: ## .ci/run in a fresh clone with cold caches, timed: phases, the slowest packages and tests (bin/ci-time)
	hack/ci-time.sh

FUZZTIME ?= 60s

fuzz: ## each fuzz target for FUZZTIME (default 60s); what it finds lands in the package's testdata/fuzz, which make test replays
	$(GO) test ./scenarios -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/converge -run '^$$' -fuzz '^FuzzSeedList$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/scaler -run '^$$' -fuzz '^FuzzParseFlags$$' -fuzztime $(FUZZTIME)
	$(GO) test ./sim/fake -run '^$$' -fuzz '^FuzzREST$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios/expect -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios/expect -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./scenarios/expect -run '^$$' -fuzz '^FuzzParsePath$$' -fuzztime $(FUZZTIME)

assets: ## build kube-apiserver, kube-controller-manager, kube-scheduler and etcd from source, and kwok and kwokctl (once per machine)
	@hack/assets.sh
	@hack/kwok.sh >/dev/null

STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

# Lint builds as the tests beside it do (RACE: -race under test-full):
# go vet compiles every package the way go test needs it, and
# staticcheck reads the same compiled packages (GOFLAGS reaches the go
# list it runs), so the tree is compiled once rather than once for the
# tests and once for lint (on 2 cores from a cold cache: 8 min rather
# than 13).
RACE ?=
lint: vet staticcheck ## gofmt, go vet and staticcheck

fmt:
	@unformatted="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

vet: fmt
	$(GO) vet $(RACE) $(PKGS)

staticcheck: $(STATICCHECK)
	GOFLAGS="$$GOFLAGS $(RACE)" $(STATICCHECK) $(PKGS)

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

bench: build assets ## benchmarks, then simulated-to-wall ratios: the fake catalogue over 3 seeds one run at a time, an idle hour, scale-10k, 2,000 Deployments on envtest (figures in docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)
	@rm -rf $(BIN)/bench && mkdir -p $(BIN)/bench
	$(BIN)/converge run --backend fake --seeds 1-3 --parallel 1 --report $(BIN)/bench/catalogue
	$(BIN)/converge run scenarios/scaler/testdata/idle-hour.yaml --seeds 1-3 --parallel 1 --report $(BIN)/bench/idle-hour
	$(BIN)/converge run scenarios/scaler/testdata/scale-10k.yaml --report $(BIN)/bench/scale-10k
	$(BIN)/converge run scenarios/scaler/testdata/scale-2000-envtest.yaml --backend envtest --report $(BIN)/bench/scale-2000-envtest

kind-chaos: ## on a machine with Docker and kind: the cluster backend's tests on a kind cluster
	@mkdir -p $(BIN)
	kind create cluster --config config/kind.yaml --kubeconfig $(BIN)/kind.kubeconfig
	CONVERGE_CLUSTER_KUBECONFIG=$(CURDIR)/$(BIN)/kind.kubeconfig $(GO) test -count=1 -v ./sim/cluster; \
	status=$$?; kind delete cluster --name converge; exit $$status

kwok-cluster: build assets ## a kwokctl cluster (binary runtime: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) until interrupted; prints its kubeconfig
	@$(BIN)/converge kwok

kwok-chaos: build assets ## the cluster backend's tests and the catalogue's cluster scenarios, each on a kwokctl cluster of its own; writes bin/kwok-chaos
	CONVERGE_REQUIRE_KWOK=1 $(GO) test -count=1 -v ./sim/cluster
	@rm -rf $(BIN)/kwok-chaos
	$(BIN)/converge run --backend cluster --kwok --seeds 1 --report $(BIN)/kwok-chaos --junit $(BIN)/kwok-chaos/junit.xml

clean: ## remove build outputs
	rm -rf $(BIN)

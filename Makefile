# converge: run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...
BIN   := bin

.PHONY: help build test lint bench manifests clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build the binaries into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

test: lint ## vet, format check and every test with the race detector
	$(GO) test -race -count=1 $(PKGS)

lint: ## gofmt and go vet
	@unformatted="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

bench: ## benchmarks (figures in README.md)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(PKGS)

clean: ## remove build outputs
	rm -rf $(BIN)

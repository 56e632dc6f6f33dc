# The README's two commands are `make run` and `make test`.
SHELL := /bin/bash
GO    ?= go
SQLC  := $(GO) tool -modfile=tools/go.mod sqlc

.PHONY: run test lint generate check-generated bench build

## run: the local demo — finds or starts a database, migrates it, and waits
run: build
	@exec bin/orangerail demo

## test: lint, the generated-code check, and every test with the race detector
test: lint check-generated
	$(GO) test -race -count=1 ./...

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## generate: regenerate sqlc code in internal/db
generate:
	$(SQLC) generate

## check-generated: fail when internal/db is stale against queries/ and migrations/
check-generated:
	$(SQLC) diff

## bench: benchmarks, one JSON object per line
bench:
	$(GO) run ./internal/bench

build:
	$(GO) build -o bin/orangerail ./cmd/server

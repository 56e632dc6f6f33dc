# The README's two commands are `make run` and `make test`.
SHELL := /bin/bash
GO    ?= go
SQLC  := $(GO) tool -modfile=tools/go.mod sqlc
LINT  := $(GO) tool -modfile=tools/lint/go.mod golangci-lint

.PHONY: run test lint generate check-generated bench build image-binary e2e conformance browser fuzz soak pgbouncer

## run: the local demo — a database found or started, the example served over HTTP (LISTEN=addr to move it;
## off loopback, PUBLIC_URL=the URL clients reach it at)
LISTEN ?= 127.0.0.1:8080
PUBLIC_URL ?=
run: build
	@exec bin/orangerail demo --listen '$(LISTEN)'$(if $(PUBLIC_URL), --public-url '$(PUBLIC_URL)')

## test: lint, the generated-code check, every test with the race detector,
## the end-to-end run through the TypeScript MCP SDK, the conformance run,
## the integration tests again behind PgBouncer, and a two-minute soak with a
## fixed seed (after the rest, not beside it); first the image's binary, built
## as the Dockerfile builds it
test: image-binary lint check-generated browser
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory pgbouncer
	e2e/run.sh
	e2e/conformance/run.sh
	$(MAKE) --no-print-directory soak DURATION=2m SEED=1 SOAK_TIMEOUT=15m

## soak: three replicas of the real binary on one database, under mixed load
## from six agents, for DURATION, while faults drawn from a PRNG seeded with
## SEED are injected (a replica's backends terminated, a replica killed with
## SIGKILL and started again, latency, resets and dropped answers on the
## network toward Postgres); then the invariant checker. One summary line;
## it fails on any violation. Needs TEST_DATABASE_URL, as the tests do.
## SOAK_TIMEOUT bounds the whole run (build, load, drain and check): raise
## it with a DURATION past 20m.
DURATION    ?= 10m
SEED        ?= 1
SOAK_TIMEOUT ?= 30m
soak:
	cd internal/faults && $(GO) test -count=1 -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) -soak.duration=$(DURATION) -soak.seed=$(SEED)

## browser: the browser tests need Debian's chromium (CHROMIUM=path for another);
## .ci/run installs it, and a missing one fails here before the long run
CHROMIUM ?= /usr/bin/chromium
browser:
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { echo "no browser at $(CHROMIUM): as root, run: apt-get update && apt-get install -y chromium (.ci/run does it)" >&2; exit 1; }

## pgbouncer: the integration tests of the engine, the MCP server, the doors,
## the desk and the webhooks again, each test's database behind a PgBouncer of
## its own in transaction pooling mode (Debian's pgbouncer, or
## TEST_PGBOUNCER_BIN; .ci/run installs it)
PGBOUNCER_BIN      ?= $(or $(TEST_PGBOUNCER_BIN),/usr/sbin/pgbouncer)
PGBOUNCER_PACKAGES := ./internal/database ./internal/engine ./internal/mcp ./internal/app ./internal/front ./internal/desk/... ./internal/webhooks
pgbouncer:
	@test -x $(PGBOUNCER_BIN) || { echo "no pgbouncer at $(PGBOUNCER_BIN): as root, run: apt-get update && apt-get install -y pgbouncer (.ci/run does it)" >&2; exit 1; }
	TEST_PGBOUNCER=1 TEST_PGBOUNCER_BIN=$(PGBOUNCER_BIN) $(GO) test -count=1 $(PGBOUNCER_PACKAGES)

## fuzz: every native fuzz target (func FuzzX in a _test.go under internal/),
## one at a time, each for FUZZTIME (FUZZ=regexp picks targets by name): go
## test fuzzes one target per run. `make test` runs their seed corpora. The
## HTTP door's targets need TEST_DATABASE_URL, as the tests do. A crasher is
## written to the package's testdata/fuzz/FuzzX/: commit it once fixed.
FUZZTIME ?= 30s
FUZZ     ?= .
fuzz:
	@set -eo pipefail; grep -rl --include='*_test.go' '^func Fuzz' internal | sort | while read -r file; do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "$$target" | grep -Eq '$(FUZZ)' || continue; \
			echo "== $$target ./$$(dirname "$$file") for $(FUZZTIME)"; \
			$(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) "./$$(dirname "$$file")"; \
		done; \
	done

## e2e: the demo's stdio server driven by the official TypeScript MCP SDK client
e2e:
	e2e/run.sh

## conformance: the official MCP conformance suite's server scenarios and the
## Inspector CLI's --strict tools/list against the demo (pinned in
## e2e/conformance; Node 22 from npm when the machine's is older)
conformance:
	e2e/conformance/run.sh

## lint: golangci-lint (pinned in tools/lint, configured in .golangci.yml:
## gofmt, go vet, staticcheck, errcheck, gosec, revive, bodyclose, …)
lint:
	$(LINT) run ./...

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
	$(GO) build -o bin/orangerail ./cmd/orangerail

## image-binary: the binary the Dockerfile builds, by the same script
## (deploy/build.sh: cgo, static, the version stamped), into bin/image;
## it fails when the image's build would (no Docker needed)
image-binary:
	GO=$(GO) deploy/build.sh bin/image/orangerail

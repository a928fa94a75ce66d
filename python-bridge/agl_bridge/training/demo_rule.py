"""The demos' pass rule, in one place: a run of ``make demo`` (``scripts/demo.sh``), ``make demo-verl``
(``scripts/demo-verl.sh``) or ``make demo-seeds`` (``bench/demo-seeds/report.py``) passes when its first step's reward
is at most ``FIRST_MAX`` and its final reward (``report.run_summary``: the mean of the last ``FINAL_WINDOW`` steps) at
least ``FINAL_MIN``; ``make demo-seeds`` also holds each run to ``WALL_MAX_S`` seconds.

    python -m agl_bridge.training.demo_rule SUMMARY.json --label "agl demo" --started EPOCH_S [--wall-max S] [--plot]

prints the run's line (after its text reward plot with ``--plot``) and exits 0 when the rule is met, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agl_bridge.training.plot import FINAL_WINDOW, reward_plot

__all__ = ["FINAL_MIN", "FIRST_MAX", "WALL_MAX_S", "Verdict", "judge", "line", "steps_to_target"]

FIRST_MAX, FINAL_MIN, WALL_MAX_S = 0.3, 0.9, 300.0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    first: float
    final: float
    steps: int
    wall_s: float | None


def judge(summary: Mapping[str, Any], wall_s: float | None = None, *, wall_max_s: float | None = None) -> Verdict:
    """The rule applied to a trainer's summary JSON (and, when ``wall_max_s`` is given, to the run's wall time)."""
    first, final = float(summary["initial_reward"]), float(summary["final_reward"])
    ok = first <= FIRST_MAX and final >= FINAL_MIN
    if wall_max_s is not None:
        ok = ok and wall_s is not None and wall_s <= wall_max_s
    return Verdict(ok, first, final, len(summary["rewards"]), wall_s)


def steps_to_target(rewards: Sequence[float]) -> int | None:
    """The first step (1-based) at which the mean of the last ``FINAL_WINDOW`` steps reached ``FINAL_MIN``."""
    for end in range(FINAL_WINDOW, len(rewards) + 1):
        if sum(rewards[end - FINAL_WINDOW : end]) / FINAL_WINDOW >= FINAL_MIN:
            return end
    return None


def line(label: str, verdict: Verdict, wall_max_s: float | None = None) -> str:
    wall = f"{verdict.wall_s:.0f} s in all" if verdict.wall_s is not None else "wall time unknown"
    limit = f" (limit {wall_max_s:.0f} s)" if wall_max_s is not None else ""
    return (
        f"{label}: {verdict.steps} steps, {wall}{limit}; initial reward {verdict.first:.3f} (target <= {FIRST_MAX}), "
        f"final {verdict.final:.3f} (mean of the last {FINAL_WINDOW} steps, target >= {FINAL_MIN}): "
        f"{'reached' if verdict.ok else 'NOT reached'}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agl_bridge.training.demo_rule", description=__doc__)
    p.add_argument("summary", help="the trainer's summary JSON")
    p.add_argument("--label", default="agl demo")
    p.add_argument("--started", type=float, default=None, help="when the run started (seconds since the epoch)")
    p.add_argument("--wall-max", type=float, default=None, help="also fail a run longer than this (seconds)")
    p.add_argument("--plot", action="store_true", help="print the text reward plot first")
    a = p.parse_args(argv)
    with open(a.summary) as f:
        summary = json.load(f)
    wall = time.time() - a.started if a.started is not None else None
    if a.plot:
        print("\nreward per step\n" + reward_plot(summary["rewards"]))
    verdict = judge(summary, wall, wall_max_s=a.wall_max)
    print("\n" + line(a.label, verdict, a.wall_max), flush=True)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())

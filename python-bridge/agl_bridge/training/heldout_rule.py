"""``make demo-real``'s pass rule: held-out accuracy (the validations before training and after the last step, greedy
on a split never trained on) must gain at least ``MIN_GAIN`` with the 95 % interval of the gain above 0. The interval
is the unpaired normal one for a difference of two proportions (a paired one, per task, would be narrower).

    python -m agl_bridge.training.heldout_rule SUMMARY.json --started EPOCH_S

prints the text reward plot, the sampled held-out accuracy before and after when the summary has it (not judged),
and ``demo-real: held-out accuracy A -> B (+D, 95% CI [LO, HI]), N steps, S s:
reached|missed``, and exits 0 when reached, else 1.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agl_bridge.training.plot import reward_plot

__all__ = ["MIN_GAIN", "HeldOut", "judge_heldout"]

MIN_GAIN = 0.15


@dataclass(frozen=True)
class HeldOut:
    before: float
    after: float
    low: float
    high: float
    ok: bool

    @property
    def gain(self) -> float:
        return self.after - self.before


def judge_heldout(summary: Mapping[str, Any], key: str = "validation") -> HeldOut:
    """The rule applied to a trainer's summary JSON: its ``key`` list (``validation``, greedy; or
    ``validation_sampled``, with training's sampling), before training and after the last step."""
    validations = summary.get(key) or []
    if len(validations) < 2:
        raise ValueError(f"the summary needs a {key} before training and one after it")
    first, last = validations[0], validations[-1]
    a, b = float(first["reward_mean"]), float(last["reward_mean"])
    half = 1.96 * math.sqrt(a * (1 - a) / max(1, int(first["n"])) + b * (1 - b) / max(1, int(last["n"])))
    gain = b - a
    return HeldOut(a, b, gain - half, gain + half, gain >= MIN_GAIN and gain - half > 0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agl_bridge.training.heldout_rule", description=__doc__)
    p.add_argument("summary", help="the trainer's summary JSON")
    p.add_argument("--started", type=float, required=True, help="when the run started (seconds since the epoch)")
    a = p.parse_args(argv)
    with open(a.summary) as f:
        summary = json.load(f)
    print("\nreward per step (sampled, training tasks)\n" + reward_plot(summary["rewards"]))
    if summary.get("validation_sampled"):
        r = judge_heldout(summary, "validation_sampled")
        print(
            f"demo-real: sampled held-out accuracy (training temperature) {r.before:.3f} -> {r.after:.3f}"
            f" ({r.gain:+.3f}, 95% CI [{r.low:.3f}, {r.high:.3f}])",
            flush=True,
        )
    r = judge_heldout(summary)
    print(
        f"demo-real: held-out accuracy {r.before:.3f} -> {r.after:.3f} ({r.gain:+.3f}, 95% CI [{r.low:.3f}, "
        f"{r.high:.3f}]), {len(summary['rewards'])} steps, {time.time() - a.started:.0f} s: "
        f"{'reached' if r.ok else 'missed'}",
        flush=True,
    )
    return 0 if r.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""A text plot of a reward curve (for terminals and CI logs)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["reward_plot"]


def reward_plot(rewards: Sequence[float], height: int = 10, width: int = 72, lo: float = 0.0, hi: float = 1.0) -> str:
    """Columns are steps (averaged in buckets when there are more than ``width``), rows reward levels from ``hi``
    down to ``lo``."""
    if not rewards:
        return "(no steps)"
    buckets = max(1, -(-len(rewards) // width))
    cols = [sum(rewards[i : i + buckets]) / len(rewards[i : i + buckets]) for i in range(0, len(rewards), buckets)]
    span = (hi - lo) or 1.0
    levels = [min(height - 1, max(0, round((c - lo) / span * (height - 1)))) for c in cols]
    lines = []
    for row in range(height - 1, -1, -1):
        label = lo + span * row / (height - 1)
        lines.append(f"{label:5.2f} |" + "".join("*" if lvl == row else (":" if lvl > row else " ") for lvl in levels))
    lines.append("      +" + "-" * len(cols))
    step_label = f"step 1 .. {len(rewards)}" + (f" ({buckets} steps per column)" if buckets > 1 else "")
    lines.append("       " + step_label)
    return "\n".join(lines)

"""Reward curves: a text plot for terminals and CI logs, and a PNG (matplotlib) to keep beside a run's summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["FINAL_WINDOW", "reward_plot", "reward_png"]

# A run's final reward is the mean of its last FINAL_WINDOW steps' rewards (the running mean drawn on the PNG).
FINAL_WINDOW = 5


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


def reward_png(
    path: str | Path,
    rewards: Sequence[float],
    *,
    title: str = "reward per step",
    target: float | None = None,
    window: int = FINAL_WINDOW,
    validation: Sequence[tuple[int, float]] = (),
) -> Path:
    """Writes the reward per training step (and its running mean over ``window`` steps, a dashed ``target`` line and
    validation points ``(steps done, reward)`` when given) as a PNG; returns the path."""
    # A bare Figure (no pyplot): no global backend or figure registry, so it is safe on any thread and headless.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    steps = list(range(1, len(rewards) + 1))
    fig = Figure(figsize=(8, 4.5), dpi=100)
    ax = fig.subplots()
    ax.plot(steps, rewards, color="tab:blue", alpha=0.35, linewidth=1, label="reward (step mean)")
    if len(rewards) >= window:
        running = [sum(rewards[i - window + 1 : i + 1]) / window for i in range(window - 1, len(rewards))]
        ax.plot(steps[window - 1 :], running, color="tab:blue", linewidth=2, label=f"mean of last {window} steps")
    if validation:
        ax.plot(*zip(*validation, strict=True), "o", color="tab:orange", label="validation")
    if target is not None:
        ax.axhline(target, color="tab:green", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set(title=title, xlabel="training step", ylabel="reward", ylim=(-0.02, 1.02), xlim=(0, max(1, len(steps))))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    return out

"""What a run tells its user: a progress line per step and per validation, the run's summary (the trainers' summary
JSON: ``--summary``, ``agl.summary``), its text reward plot and initial/final reward, and ``write_summary``, which both
trainers use to write the summary and the reward curve PNG beside it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agl_bridge.log import get_logger
from agl_bridge.training.interfaces import StepResult
from agl_bridge.training.plot import FINAL_WINDOW, reward_plot, reward_png
from agl_bridge.training.validation import ValidationResult

__all__ = ["format_progress", "format_validation", "run_summary", "write_summary"]

log = get_logger("training")


def format_progress(r: StepResult, total_steps: int, asynchronous: bool) -> str:
    gen_s = r.timings.get("wait", 0.0) + r.timings.get("enqueue", 0.0)
    tok_s = r.response_tokens / gen_s if gen_s > 0 else 0.0
    bridge = sum(r.timings.get(k, 0.0) for k in ("enqueue", "collect", "convert", "publish"))
    line = (
        f"step {r.step + 1}/{total_steps}  reward {r.reward_mean:.3f}  "
        f"rollouts {r.n_rollouts}  rows {r.n_rows}  tokens/s {tok_s:.0f}  "
        f"served by v{','.join(map(str, r.versions_seen)) or '?'} -> published v{r.version}  "
        f"time wait {r.timings.get('wait', 0):.2f}s update {r.timings.get('update', 0):.2f}s bridge {bridge:.2f}s"
    )
    if not asynchronous:
        return line
    m = r.metrics
    histogram = ",".join(f"{k.rsplit('/', 1)[1]}:{int(v)}" for k, v in m.items() if k.startswith("async/staleness/"))
    weight = m.get("rollout_corr/rollout_is_mean")
    correction = f"  IS weight mean {weight:.3f}" if weight is not None else ""
    dropped = int(m.get("async/groups_dropped_stale", 0))
    return (
        f"{line}\n      async: staleness {histogram or '-'}  dropped {dropped}  "
        f"carried {int(m.get('async/groups_carried', 0))}  idle trainer {r.timings.get('wait', 0):.2f}s "
        f"generation {r.timings.get('generation_idle', 0):.2f}s{correction}"
    )


def format_validation(r: ValidationResult, total_steps: int) -> str:
    m = r.metrics
    best = next((f"  best@{k[len('val/reward_best@') :]} {v:.3f}" for k, v in m.items() if "best@" in k), "")
    when = "before training" if r.step == 0 else f"after step {r.step}/{total_steps}"
    return (
        f"validation {when} (policy v{r.version}): reward {r.reward_mean:.3f}{best}  "
        f"rollouts {r.n} ({int(m['val/n_succeeded'])} succeeded, {int(m['val/n_rollouts_w_reward'])} with a "
        f"reward)  time {r.wall_s:.2f}s"
    )


def _validation_rows(validations: Sequence[ValidationResult]) -> list[dict[str, Any]]:
    return [
        {"step": v.step, "version": v.version, "reward_mean": v.reward_mean, "n": v.n, "metrics": v.metrics}
        for v in validations
    ]


def run_summary(
    history: Sequence[StepResult],
    validations: Sequence[ValidationResult],
    sampled: Sequence[ValidationResult] = (),
) -> dict[str, Any]:
    """The run so far as the trainers' summary JSON: reward, step, published version, versions seen, response
    tokens, timings and metrics per step, the validations (``sampled`` ones, with training's sampling, apart as
    ``validation_sampled``) and, once a step ran, the initial and final reward (mean of the last ``FINAL_WINDOW``
    steps), which it also logs with the text reward plot."""
    rewards = [r.reward_mean for r in history]
    summary: dict[str, Any] = {
        "rewards": rewards,
        "steps": [r.step for r in history],
        "versions_published": [r.version for r in history],
        "versions_seen": [r.versions_seen for r in history],
        "response_tokens": [r.response_tokens for r in history],
        "timings": [r.timings for r in history],
        "metrics": [r.metrics for r in history],
        "validation": _validation_rows(validations),
    }
    if sampled:
        summary["validation_sampled"] = _validation_rows(sampled)
    if rewards:
        tail = rewards[-FINAL_WINDOW:]
        summary["initial_reward"], summary["final_reward"] = rewards[0], sum(tail) / len(tail)
        log.info("reward per step\n%s", reward_plot(rewards))
        log.info(
            "initial reward %.3f (step %d)  ->  final reward %.3f (mean of the last %d steps)",
            rewards[0],
            history[0].step + 1,
            summary["final_reward"],
            len(tail),
        )
    if validations:
        log.info(
            "validation reward %s",
            "  ".join(f"{'before' if v.step == 0 else f'step {v.step}'}: {v.reward_mean:.3f}" for v in validations),
        )
    return summary


def write_summary(path: str | Path, summary: dict[str, Any], *, title: str, target: float | None = None) -> Path | None:
    """Writes ``summary`` as JSON to ``path`` and, when a step ran, the reward curve beside it as
    ``NAME-rewards.png`` (``target`` drawn as a line); returns the PNG's path, and logs it."""
    path = Path(path)
    path.write_text(json.dumps(summary))
    if not summary["rewards"]:
        return None
    png = reward_png(
        path.with_name(f"{path.stem}-rewards.png"),
        summary["rewards"],
        title=title,
        target=target,
        validation=[(v["step"], v["reward_mean"]) for v in summary["validation"]],
    )
    log.info("reward curve: %s", png)
    return png

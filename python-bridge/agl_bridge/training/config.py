"""``LoopConfig``: the one schema of what the training loop does, shared by both trainers, with one set of defaults.

Each field carries its help text, and where VERL has a key for it, that key (``verl``): the VERL trainer reads those
from VERL's config and the others from ``agl.<field>`` (``agl_bridge.verl.settings``); the local trainer has a flag
``--<field-with-dashes>`` for every field (``agl_bridge.local.__main__``). ``agl train`` passes the arguments after
``--`` to either trainer as they are, so every field is settable from it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from agl_bridge.errors import ConfigError

__all__ = ["LoopConfig", "loop_fields", "parse_field"]


def _setting(default: Any, help: str, verl: str | None = None) -> Any:
    return field(default=default, metadata={"help": help, "verl": verl})


@dataclass
class LoopConfig:
    """What the loop does each step. ``dataset`` rows are task inputs (any JSON); step ``k`` takes rows
    ``k*tasks_per_step ...`` (cycling), so a resumed trainer sees the same tasks."""

    total_steps: int = _setting(100, "training steps", "trainer.total_training_steps")
    tasks_per_step: int = _setting(8, "tasks per step", "data.train_batch_size")
    n: int = _setting(8, "rollouts per task (one GRPO group)", "actor_rollout_ref.rollout.n")
    adv_estimator: str = _setting("grpo", "VERL's advantage estimator (grpo, rloo, ...)", "algorithm.adv_estimator")
    norm_adv_by_std_in_grpo: bool = _setting(
        True, "GRPO: divide advantages by the group's std", "algorithm.norm_adv_by_std_in_grpo"
    )
    max_prompt_length: int | None = _setting(1024, "prompt tokens kept (left-truncated)", "data.max_prompt_length")
    max_response_length: int | None = _setting(1024, "response tokens kept", "data.max_response_length")
    reward_fillna: float = _setting(0.0, "reward of a rollout that reported none")
    resources_id: str = _setting("agl-policy", "the resources snapshot the policy is published as")
    llm_name: str = _setting("main_llm", "the LLM resource's name in it (what the agents ask for)")
    prompt_templates: dict[str, Any] | None = _setting(
        None,
        'prompt template resources published beside the LLM, as JSON {"name": "file"} (f-string templates, read at'
        " start; an agent reads one with resources.promptTemplate(name))",
    )
    triplet_options: dict[str, Any] | None = _setting(
        None,
        'how the store builds triplets: agl.v1.TripletOptions as JSON, e.g. {"mode": "TRIPLET_MODE_TRAJECTORY"}'
        " (default: one triplet per LLM call)",
    )
    rollout_timeout: float = _setting(600.0, "seconds to wait for a step's rollouts (later ones are cancelled)")
    collect_timeout: float = _setting(60.0, "seconds to wait for the triplets of finished rollouts")
    # Timed-out, failed and unresponsive attempts are retried up to ``max_attempts``; the store's watchdog times an
    # attempt out after ``attempt_timeout`` (its runner may have died with a trainer it shared a process with).
    max_attempts: int = _setting(3, "attempts per rollout (failed, timed-out, unresponsive ones are retried)")
    attempt_timeout: float = _setting(120.0, "seconds before the store times an attempt out")
    checkpoint_dir: str | None = _setting(
        None,
        "where the run's files go (checkpoints, history.jsonl); a restart resumes from them",
        "trainer.default_local_dir",
    )
    keep_checkpoints: int = _setting(2, "checkpoints kept")
    save_freq: int = _setting(1, "checkpoint every K steps and after the last (0 or -1: never)", "trainer.save_freq")
    resume: bool = _setting(
        True, "resume from the checkpoint directory (false: start from step 0)", "trainer.resume_mode"
    )
    log_every: int = _setting(1, "print a progress line every K steps")
    # Validation (VERL's trainer.test_freq, val_before_train, val_only, rollout.val_kwargs.n): after step k when
    # test_freq > 0 and k is a multiple of it or the last step; ``val_sampling`` (e.g. {"temperature": 0}) is merged
    # over the LLM resources' sampling for validation rollouts, which then run against their own snapshot
    # ``{resources_id}-val``.
    test_freq: int = _setting(
        10, "validate every K steps and after the last (0: only before training)", "trainer.test_freq"
    )
    val_before_train: bool = _setting(True, "validate before the first step", "trainer.val_before_train")
    val_only: bool = _setting(False, "only validate, never train", "trainer.val_only")
    val_n: int = _setting(1, "validation rollouts per task", "actor_rollout_ref.rollout.val_kwargs.n")
    val_sampling: dict[str, Any] | None = _setting(
        None,
        'sampling of validation rollouts as JSON, e.g. {"temperature": 0} (default: training\'s)',
        "actor_rollout_ref.rollout.val_kwargs",
    )
    val_sampled_n: int = _setting(
        0,
        "also validate with training's sampling, K rollouts per task, beside the greedy (val_sampling) validation"
        " (0: not)",
    )
    val_timeout: float | None = _setting(None, "seconds to wait for a validation's rollouts (default: rollout_timeout)")
    # Asynchronous training (``agl_bridge.training.staleness``): the runners work on the next k steps' groups while a
    # step trains, on calls at most k updates stale. 0: synchronous.
    max_staleness: int = _setting(0, "asynchronous training: calls at most K updates stale (0: synchronous)")
    max_empty_steps: int = _setting(
        3, "stop the run, naming the rollouts' errors, after K steps in a row with nothing to train (0: never)"
    )

    def __post_init__(self) -> None:
        if self.val_n < 1:
            raise ConfigError(f"val_n must be at least 1, got {self.val_n}")
        if self.val_sampled_n < 0:
            raise ConfigError(f"val_sampled_n must be 0 (off) or more, got {self.val_sampled_n}")
        if self.max_staleness < 0:
            raise ConfigError(f"max_staleness must be 0 (synchronous) or more, got {self.max_staleness}")
        if self.n < 1 or self.tasks_per_step < 1:
            raise ConfigError(f"n and tasks_per_step must be at least 1, got {self.n} and {self.tasks_per_step}")


def loop_fields() -> list[dataclasses.Field[Any]]:
    """The fields of ``LoopConfig``, in order."""
    return list(dataclasses.fields(LoopConfig))


def _base_type(f: dataclasses.Field[Any]) -> str:
    """``int``, ``float``, ``str``, ``bool`` or ``dict``: the type of a field's value when it is not None."""
    annotation = str(f.type)
    for name in ("bool", "int", "float", "str", "dict"):
        if annotation.startswith(name):
            return name
    raise AssertionError(f"LoopConfig.{f.name}: unsupported type {annotation}")


def parse_field(f: dataclasses.Field[Any], text: str) -> Any:
    """A field's value from its text form: a number, a word, true/false, JSON for dicts, ``null``/``none`` for None
    (where the field may be None)."""
    kind, optional = _base_type(f), "None" in str(f.type)
    if optional and text.strip().lower() in ("null", "none", ""):
        return None
    try:
        if kind == "bool":
            lowered = text.strip().lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return lowered in ("true", "1")
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "dict":
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError(text)
            return value
    except ValueError:
        raise ConfigError(f"{f.name}: cannot read {text!r} as {kind}") from None
    return text

"""The VERL trainer's settings from its Hydra config: the loop's ``LoopConfig`` (the schema both trainers share), the
update's off-policy correction and the store's token.

A ``LoopConfig`` field comes from VERL's own key where VERL has one (``trainer.total_training_steps``,
``data.train_batch_size``, ``actor_rollout_ref.rollout.n``...: the field's ``verl`` metadata names it), else from
``agl.<field>``, where ``null`` (the shipped config's value) means the loop's default.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import OmegaConf, open_dict

from agl_bridge.errors import ConfigError
from agl_bridge.training.config import LoopConfig, loop_fields
from agl_bridge.training.rollout_correction import resolve_rollout_correction

__all__ = [
    "agl_token",
    "apply_staleness",
    "bypass_mode",
    "loop_config",
    "max_staleness",
    "rollout_correction",
    "val_sampling",
]


def val_sampling(config: Any) -> dict[str, Any] | None:
    """How validation rollouts sample, from VERL's ``actor_rollout_ref.rollout.val_kwargs``: greedy (temperature 0)
    unless ``do_sample``, else its temperature and top_p. None when that is how training samples anyway."""
    rollout = config.actor_rollout_ref.rollout
    kwargs = rollout.get("val_kwargs")
    if kwargs is None:
        return None
    if not kwargs.get("do_sample", False):
        return {"temperature": 0.0}
    sampling: dict[str, Any] = {"temperature": float(kwargs.get("temperature", rollout.temperature))}
    top_p = float(kwargs.get("top_p", 1.0))
    if top_p < 1.0:
        sampling["top_p"] = top_p
    if sampling == {"temperature": float(rollout.temperature)}:
        return None
    return sampling


def _verl_value(config: Any, name: str, key: str) -> Any:
    """A field's value from its VERL key (``OmegaConf.select``), translated where VERL's meaning differs."""
    value = OmegaConf.select(config, key)
    if name == "total_steps":
        return int(value or 1)
    if name == "checkpoint_dir":
        # VERL's own checkpoints go to default_local_dir/global_step_N; the loop's beside them.
        return str(value) + "/agl"
    if name == "resume":
        return str(value or "auto") != "disable"
    if name == "val_sampling":
        return val_sampling(config)
    if name == "val_n":
        return int(value if value is not None else 1)
    if name == "save_freq":
        # -1 (VERL's default): never. The loop then checkpoints exactly when VERL's fit would.
        return int(value if value is not None else -1)
    if value is None:
        return None
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def loop_config(config: Any) -> LoopConfig:
    """The loop's settings from the Hydra config (VERL keys where VERL has them, ``agl.*`` otherwise)."""
    values: dict[str, Any] = {}
    for f in loop_fields():
        key = f.metadata["verl"]
        if key is not None:
            value = _verl_value(config, f.name, key)
        else:
            value = config.agl.get(f.name)
            if OmegaConf.is_config(value):
                value = OmegaConf.to_container(value, resolve=True)
        if value is None:
            continue  # unset (agl.<field>: null): the loop's default
        if value is not None and not isinstance(value, dict | list | str):
            value = _as(f.type, value, f.name)
        values[f.name] = value
    values["max_staleness"] = max_staleness(config)
    return LoopConfig(**values)


def _as(annotation: Any, value: Any, name: str) -> Any:
    """``value`` as the field's scalar type (Hydra gives ints for floats written without a point, strings on the
    command line for some)."""
    kind = str(annotation).split(" ")[0]
    try:
        return {"int": int, "float": float, "bool": bool, "str": str}.get(kind, lambda v: v)(value)
    except (TypeError, ValueError):
        raise ConfigError(f"agl.{name}: {value!r} is not a {kind}") from None


def max_staleness(config: Any) -> int:
    """The staleness bound of agl's asynchronous loop — the one setting, taken from agl's key or VERL's.

    ``agl.max_staleness`` k, when set, decides (0: synchronous). Left null, VERL's V1 keys decide: its
    ``trainer.v1.trainer_mode`` ``sync`` is k = 0, and an asynchronous mode takes VERL's staleness cap
    ``trainer.v1.sampler.max_off_policy_threshold`` t, the number of weight versions a group may span: k = t - 1
    (a group trained by the weights it was enqueued under spans 1). ``AglTaskRunner`` writes the result back into both
    (``apply_staleness``)."""
    v1 = config.trainer.get("v1") or {}
    mode = str(v1.get("trainer_mode", "sync"))
    if mode == "separate_async":
        raise ConfigError(
            "trainer.v1.trainer_mode=separate_async (standalone rollout replicas, VERL's own agent loop) is not "
            "supported by the agl loop: its rollouts are agl runners behind the store. Use agl.max_staleness=k "
            "(colocated replicas; the runners keep generating while the actor updates)"
        )
    if mode not in ("sync", "colocate_async"):
        raise ConfigError(f"unknown trainer.v1.trainer_mode {mode!r}: sync, colocate_async or separate_async")
    configured = config.agl.get("max_staleness")
    if configured is not None:
        k = int(configured)
        if k < 0:
            raise ConfigError(f"agl.max_staleness must be >= 0, got {k}")
        if k == 0 and mode != "sync":
            raise ConfigError(
                f"trainer.v1.trainer_mode={mode} asks for asynchronous training but agl.max_staleness=0: set "
                "agl.max_staleness to k > 0, or leave it null to take trainer.v1.sampler.max_off_policy_threshold - 1"
            )
        return k
    if mode == "sync":
        return 0
    threshold = (v1.get("sampler") or {}).get("max_off_policy_threshold")
    if threshold is None or int(threshold) < 2:
        raise ConfigError(
            f"trainer.v1.trainer_mode={mode} needs a staleness bound for the agl loop: "
            "trainer.v1.sampler.max_off_policy_threshold >= 2, or agl.max_staleness=k"
        )
    return int(threshold) - 1


def apply_staleness(config: Any) -> None:
    """Writes ``max_staleness`` k into both settings before the trainer starts: ``agl.max_staleness`` k and VERL's
    ``trainer.v1.sampler.max_off_policy_threshold`` k + 1, with ``trainer.v1.trainer_mode`` ``sync`` whatever k: the
    overlap of generation and update is agl's loop, and VERL's side runs its synchronous path (its asynchronous modes'
    replay buffer, prefetch and TransferQueue checkpoints drive VERL's own agent loop, which agl does not run)."""
    k = max_staleness(config)
    with open_dict(config):
        config.agl.max_staleness = k
        config.trainer.v1.trainer_mode = "sync"
        config.trainer.v1.sampler.max_off_policy_threshold = k + 1


def bypass_mode(config: Any) -> bool:
    """VERL's ``algorithm.rollout_correction.bypass_mode``: the engine's log-probs are the update's old log-probs
    (no forward pass to recompute them; PPO's ratio is then taken against the weights that sampled each token)."""
    return bool((config.algorithm.get("rollout_correction") or {}).get("bypass_mode", False))


def rollout_correction(config: Any) -> dict[str, Any] | None:
    """The update's off-policy correction (``agl_bridge.training.rollout_correction``) from VERL's
    ``algorithm.rollout_correction``, ``agl.max_staleness`` and ``agl.rollout_correction``; None in VERL's bypass
    mode, where there is no separate old policy to weight against (VERL's V1 trainer skips it there too)."""
    if bypass_mode(config):
        return None
    configured = config.algorithm.get("rollout_correction")
    settings = OmegaConf.to_container(configured, resolve=True) if configured is not None else None
    if settings is not None and not isinstance(settings, dict):
        raise ConfigError(f"algorithm.rollout_correction must be a mapping, got {settings!r}")
    enabled = config.agl.get("rollout_correction")
    return resolve_rollout_correction(
        {str(k): v for k, v in settings.items()} if settings is not None else None,
        loop_config(config).max_staleness,
        None if enabled is None else bool(enabled),
    )


def agl_token(config: Any) -> str | None:
    """The store's token (also the LLM proxy's): ``agl.token``, else ``$AGL_TOKEN`` (what ``agl train --token``
    sets for the processes it starts)."""
    return config.agl.get("token") or os.environ.get("AGL_TOKEN") or None

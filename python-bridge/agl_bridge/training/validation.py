"""Validation for both trainers, the way VERL and Agent Lightning do it: the validation tasks are enqueued to the
store as rollouts of mode ``val`` (``val_n`` per task, one group each), run by the same agl runners against the
current policy version, and only their rewards are read — they never reach a training batch (the training triplet
stream asks for mode ``train`` only, and the loop drops any other mode it is handed).

``val_metrics`` turns the finished rollouts into metrics (``val/reward_mean``, ``val/n``, …); ``collect_rollouts``
reads them from the store (``StreamTriplets`` filtered by the rollout ids); ``val_resources`` derives the validation
snapshot when validation samples differently from training (VERL's ``rollout.val_kwargs``: greedy by default).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.log import get_logger
from agl_bridge.store.client import StoreClient
from agl_bridge.store.convert import from_struct, to_struct
from agl_bridge.store.triplet_source import read_triplets
from agl_bridge.store.triplets import RolloutTriplets, final_reward, status_name
from agl_bridge.training.config import LoopConfig
from agl_bridge.training.rollouts import Rollouts

__all__ = ["ValidationResult", "collect_rollouts", "run_validation", "val_metrics", "val_resources"]

log = get_logger("training")


@dataclass
class ValidationResult:
    """One validation run: after ``step`` training steps (0: before training), served by ``version`` of the
    policy (the training snapshot's version; ``resources_id``/``resources_version`` name the snapshot the rollouts
    ran against, a separate one when validation samples differently)."""

    step: int
    version: int
    reward_mean: float
    n: int
    resources_id: str
    resources_version: int
    rollout_ids: list[str]
    wall_s: float
    metrics: dict[str, float] = field(default_factory=dict)


def val_resources(
    resources: Mapping[str, types_pb2.Resource], sampling: Mapping[str, Any]
) -> dict[str, types_pb2.Resource]:
    """The validation snapshot: ``resources`` whose LLM resources sample with ``sampling`` merged over their own
    sampling parameters (so ``max_tokens`` and the rest stay).

    When the agents' LLM is a ``proxy_llm``, the plain ``llm`` resources (the engines the proxy routes to) are left
    out: the LLM proxy follows the latest snapshot that names engines, and stamps each call with that snapshot's id
    and version, so without them it keeps routing by the training snapshot — and validation calls, like training
    calls, are recorded as served by the policy version in force."""
    proxied = any(r.WhichOneof("kind") == "proxy_llm" for r in resources.values())
    out: dict[str, types_pb2.Resource] = {}
    for name, resource in resources.items():
        kind = resource.WhichOneof("kind")
        if proxied and kind == "llm":
            continue
        copy = types_pb2.Resource()
        copy.CopyFrom(resource)
        if kind in ("llm", "proxy_llm"):
            llm = getattr(copy, kind)
            merged = {**from_struct(llm.sampling_parameters), **dict(sampling)}
            llm.sampling_parameters.CopyFrom(to_struct(merged))
        out[name] = copy
    return out


async def collect_rollouts(
    client: StoreClient,
    rollout_ids: Sequence[str],
    timeout: float,
    *,
    mode: str = "val",
    options: Mapping[str, Any] | None = None,
) -> dict[str, RolloutTriplets]:
    """The triplets and final reward of each listed finished rollout of ``mode``, by id (rollouts not finished are
    absent), from ``StreamTriplets`` filtered by these ids; ``options`` as the trainer's ``triplet_options``."""
    if not rollout_ids:
        return {}
    got: dict[str, RolloutTriplets] = {}
    async for message in read_triplets(
        client, rollout_ids=rollout_ids, mode=mode, options=options, follow=False, timeout=timeout
    ):
        if message.HasField("rollout"):
            got[message.rollout.rollout_id] = message.rollout
    return got


def _source(task: Any) -> str | None:
    if isinstance(task, Mapping) and isinstance(task.get("data_source"), str) and task["data_source"]:
        return str(task["data_source"])
    return None


def val_metrics(
    tasks: Sequence[Any],
    groups: Sequence[Sequence[str]],
    samples: Mapping[str, RolloutTriplets],
    *,
    reward_fillna: float = 0.0,
) -> dict[str, float]:
    """Metrics of one validation run. ``groups[i]`` are the rollout ids of ``tasks[i]`` (``val_n`` each);
    ``samples`` the finished ones. Every enqueued rollout counts: one that reported no reward, failed, or did not
    finish in time scores ``reward_fillna`` (as Agent Lightning does), so a timeout cannot raise the mean.

    - ``val/reward_mean``, ``val/reward_std`` (population) over the ``val/n`` rollouts; ``val/n_tasks``;
    - ``val/reward_best@k`` (k = rollouts per task, when > 1): the mean over tasks of the best of their k rewards;
    - ``val/n_finished``, ``val/n_succeeded``, ``val/n_rollouts_w_reward``, ``val/n_rollouts_w_trace``;
    - ``val/turn_count`` (LLM-call samples per rollout with a trace) and ``val/response_length`` (tokens per
      sample), when any rollout has a trace;
    - ``val/{data_source}/reward_mean`` and ``val/{data_source}/n`` for tasks with a ``data_source`` field."""
    rewards: list[float] = []
    best: list[float] = []
    by_source: dict[str, list[float]] = defaultdict(list)
    finished = succeeded = with_reward = 0
    turns: list[int] = []
    lengths: list[int] = []
    for task, ids in zip(tasks, groups, strict=True):
        task_rewards = []
        for rollout_id in ids:
            s = samples.get(rollout_id)
            reward = reward_fillna
            if s is not None:
                finished += 1
                succeeded += status_name(s.status) == "succeeded"
                final = final_reward(s)
                if final is not None:
                    with_reward += 1
                    reward = final
                if s.triplets:
                    turns.append(len(s.triplets))
                    lengths.extend(len(t.response_token_ids) for t in s.triplets)
            task_rewards.append(reward)
        rewards.extend(task_rewards)
        if task_rewards:
            best.append(max(task_rewards))
        source = _source(task)
        if source is not None:
            by_source[source].extend(task_rewards)
    n = len(rewards)
    metrics: dict[str, float] = {
        "val/n": float(n),
        "val/n_tasks": float(len(groups)),
        "val/n_finished": float(finished),
        "val/n_succeeded": float(succeeded),
        "val/n_rollouts_w_reward": float(with_reward),
        "val/n_rollouts_w_trace": float(len(turns)),
        "val/reward_mean": float(np.mean(rewards)) if n else 0.0,
        "val/reward_std": float(np.std(rewards)) if n else 0.0,
    }
    per_task = {len(ids) for ids in groups}
    if len(per_task) == 1 and (k := per_task.pop()) > 1:
        metrics[f"val/reward_best@{k}"] = float(np.mean(best))
    if turns:
        metrics["val/turn_count"] = float(np.mean(turns))
        metrics["val/response_length"] = float(np.mean(lengths))
    for source, values in sorted(by_source.items()):
        metrics[f"val/{source}/reward_mean"] = float(np.mean(values))
        metrics[f"val/{source}/n"] = float(len(values))
    return metrics


async def run_validation(
    rollouts: Rollouts,
    resources: Mapping[str, types_pb2.Resource],
    dataset: Sequence[Any],
    config: LoopConfig,
    *,
    step: int,
    version: int,
) -> ValidationResult:
    """Runs ``dataset`` against the policy published as ``version``: ``val_n`` rollouts of mode ``val`` per task
    (one group each), waits for them (``val_timeout``, else ``rollout_timeout``), reads their final rewards; nothing
    is trained. With ``val_sampling``, the rollouts run against their own snapshot ``{resources_id}-val`` (the
    published ``resources`` sampling that way)."""
    cfg, client = config, rollouts.client
    started = time.perf_counter()
    resources_id, resources_version = cfg.resources_id, version
    if cfg.val_sampling:
        resources_id = f"{cfg.resources_id}-val"
        update = await client.update_resources(
            resources_id, val_resources(resources, cfg.val_sampling), create_if_missing=True
        )
        resources_version = update.version
    groups = await rollouts.enqueue(
        dataset, cfg.val_n, mode="val", resources_id=resources_id, metadata={"step": step, "policy_version": version}
    )
    group_ids = [[r.rollout_id for r in group] for group in groups]
    ids = [r for group in group_ids for r in group]
    try:
        finished = await rollouts.wait(ids, cfg.val_timeout if cfg.val_timeout is not None else cfg.rollout_timeout)
    except asyncio.CancelledError:
        # The trainer is stopping (Ctrl-C, a cancelled task): a resumed trainer validates afresh and never reads
        # these, so the runners should not spend their time on them. (Training rollouts stay: pending.json hands
        # them to the resumed step.)
        cancelled = await rollouts.cancel(ids)
        if cancelled is not None:
            log.info("stopping: cancelled %d validation rollouts not finished yet", cancelled)
        raise
    samples = await collect_rollouts(client, finished, cfg.collect_timeout, options=cfg.triplet_options)
    metrics = val_metrics(dataset, group_ids, samples, reward_fillna=cfg.reward_fillna)
    metrics["val/policy_version"] = float(version)
    wall = time.perf_counter() - started
    metrics["timing_s/validation"] = wall
    return ValidationResult(
        step=step,
        version=version,
        reward_mean=metrics["val/reward_mean"],
        n=len(ids),
        resources_id=resources_id,
        resources_version=resources_version,
        rollout_ids=ids,
        wall_s=wall,
        metrics=metrics,
    )

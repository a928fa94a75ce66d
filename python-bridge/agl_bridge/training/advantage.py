"""Rollout-level advantages and batch shaping on top of VERL's ``compute_advantage``.

A rollout may produce several rows (one per LLM call). Running GRPO over rows would let rollouts with more calls weigh
more in the group statistics, so one representative row per rollout goes through VERL's estimator (groups then hold
exactly the ``n`` rollouts of a task), and its scalar advantage is broadcast to every row of the rollout under that
row's response mask (reference §3.4).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.ray_trainer import compute_advantage

from agl_bridge.errors import ConfigError, DataError

__all__ = ["compute_rollout_level_advantage", "drop_marked_rows", "shape_batch"]


def _rollout_rows(data: DataProto) -> dict[str, list[int]]:
    if "rollout_id_list" not in data.non_tensor_batch:
        raise DataError("rollout-level advantages need non-tensor 'rollout_id_list'")
    rows: dict[str, list[int]] = defaultdict(list)
    for i, rollout_id in enumerate(data.non_tensor_batch["rollout_id_list"]):
        rows[str(rollout_id)].append(i)
    return rows


def compute_rollout_level_advantage(
    data: DataProto,
    adv_estimator: str | AdvantageEstimator = AdvantageEstimator.GRPO,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
) -> tuple[DataProto, dict[str, float]]:
    """Adds ``advantages`` and ``returns`` [B, R] (and ``token_level_rewards`` = ``token_level_scores`` when absent).

    Every row of a rollout must share its ``uid`` and its reward (the sum of ``token_level_rewards``). Estimators that
    need per-token values (GAE) are refused: a rollout-level advantage is one number per rollout."""
    estimator = AdvantageEstimator(adv_estimator) if isinstance(adv_estimator, str) else adv_estimator
    if estimator == AdvantageEstimator.GAE:
        raise ConfigError("GAE needs per-token values; rollout-level advantages support outcome estimators only")
    if "token_level_rewards" not in data.batch.keys():
        data.batch["token_level_rewards"] = data.batch["token_level_scores"].clone()
    rows = _rollout_rows(data)
    uids = data.non_tensor_batch["uid"]
    totals = data.batch["token_level_rewards"].sum(dim=-1)
    representatives = [idxs[0] for idxs in rows.values()]
    row_rollout: np.ndarray = np.empty(len(data), dtype=np.int64)  # row -> position of its rollout in `representatives`
    for j, idxs in enumerate(rows.values()):
        row_rollout[idxs] = j
    rep_of_row = np.asarray(representatives, dtype=np.int64)[row_rollout]
    bad_uid = np.nonzero(uids != uids[rep_of_row])[0]
    if bad_uid.size:
        i = int(bad_uid[0])
        raise DataError(f"rows of rollout {data.non_tensor_batch['rollout_id_list'][i]} have different uids")
    bad_reward = torch.nonzero(~torch.isclose(totals, totals[torch.from_numpy(rep_of_row)])).flatten()
    if bad_reward.numel():
        i = int(bad_reward[0])
        raise DataError(f"rows of rollout {data.non_tensor_batch['rollout_id_list'][i]} have different rewards")

    rep = data.select_idxs(np.array(representatives, dtype=np.int64))
    rep = compute_advantage(
        rep,
        adv_estimator=estimator,
        gamma=gamma,
        lam=lam,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        config=config,
    )
    rep_mask = rep.batch["response_mask"].to(torch.float32)
    count = rep_mask.sum(dim=-1).clamp(min=1.0)
    scalar_adv = (rep.batch["advantages"] * rep_mask).sum(dim=-1) / count
    scalar_ret = (rep.batch["returns"] * rep_mask).sum(dim=-1) / count
    spread = ((rep.batch["advantages"] - scalar_adv[:, None]).abs() * rep_mask).amax(dim=-1)
    if spread.numel() and float(spread.max()) > 1e-5:
        raise DataError(f"estimator {estimator} gave a per-token advantage, not one number per rollout")
    mask = data.batch["response_mask"].to(torch.float32)
    index = torch.from_numpy(row_rollout)
    data.batch["advantages"] = scalar_adv[index][:, None] * mask
    data.batch["returns"] = scalar_ret[index][:, None] * mask
    metrics = {
        "training/rollout_level_advantage/n_rows": float(len(data)),
        "training/rollout_level_advantage/n_rollouts": float(len(rows)),
        "training/rollout_level_advantage/n_multi_row_rollouts": float(sum(len(v) > 1 for v in rows.values())),
        "training/rollout_level_advantage/max_rows_per_rollout": float(max(len(v) for v in rows.values())),
    }
    return data, metrics


def drop_marked_rows(data: DataProto) -> tuple[DataProto, int]:
    """Removes rows whose ``is_drop_mask`` is set (over-long prompts); returns the rest and how many went."""
    if "is_drop_mask" not in data.batch.keys():
        return data, 0
    keep = ~data.batch["is_drop_mask"].bool()
    dropped = int((~keep).sum())
    if dropped == 0:
        return data, 0
    return data.select_idxs(keep.numpy()), dropped


def shape_batch(
    data: DataProto, multiple: int, max_rows: int | None = None, seed: int = 0
) -> tuple[DataProto | None, dict[str, float]]:
    """Drops marked rows, then keeps a multiple of ``multiple`` rows (at most ``max_rows``), removing first rows of
    groups whose rewards are all equal (zero advantage), then random rows. ``None`` when nothing is left."""
    data, marked = drop_marked_rows(data)
    n = len(data)
    target = (n // multiple) * multiple
    if max_rows is not None:
        target = min(target, (max_rows // multiple) * multiple)
    to_drop = n - target
    uids = data.non_tensor_batch["uid"]
    totals = data.batch["token_level_scores"].sum(dim=-1)
    by_group: dict[Any, list[int]] = defaultdict(list)
    for i, uid in enumerate(uids):
        by_group[uid].append(i)
    same = [i for idxs in by_group.values() if len({round(float(totals[j]), 6) for j in idxs}) == 1 for i in idxs]
    rng = random.Random(seed)
    rng.shuffle(same)
    dropped_same = same[:to_drop]
    rest = [i for i in range(n) if i not in set(dropped_same)]
    rng.shuffle(rest)
    dropped_random = rest[: to_drop - len(dropped_same)]
    gone = set(dropped_same) | set(dropped_random)
    metrics = {
        "training/n_sample_dropped/marked": float(marked),
        "training/n_sample_dropped/same_reward": float(len(dropped_same)),
        "training/n_sample_dropped/random": float(len(dropped_random)),
    }
    if target == 0:
        return None, metrics
    keep = np.array([i for i in range(n) if i not in gone], dtype=np.int64)
    return data.select_idxs(keep), metrics

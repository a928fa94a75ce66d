"""Triplets → VERL ``DataProto`` (keys and rules of Agent Lightning's batch builder, reference §2.4 and §3.4).

One row per triplet. With ``P``/``R`` the prompt and response lengths of the batch:

- ``prompts`` [B, P] long, left-padded; ``responses`` [B, R] long, right-padded (``pad_token_id``);
- ``input_ids`` [B, P+R] = prompts ⧺ responses; ``attention_mask`` [B, P+R] long, 1 on real tokens;
- ``position_ids`` [B, P+R] = cumsum(attention_mask) - 1, clamped at 0;
- ``response_mask`` [B, R] long: the triplet's own mask (0 on inserted observation tokens) times the response part of
  the attention mask;
- ``token_level_scores`` [B, R] float32: zeros except the rollout's reward at the last real response token;
- ``rollout_log_probs`` [B, R] float32: the engine's chosen-token logprobs (0 on masked and pad tokens), present only
  when every row has them;
- ``is_drop_mask`` [B] bool: the prompt was longer than ``max_prompt_length`` (kept for group statistics, dropped
  before the update);
- non-tensor ``uid`` and ``data_id_list`` (the group id), ``rollout_id_list``, ``turn_index_list``,
  ``resources_version_list`` (the version that served the row's call, 0 when unknown: calls of one rollout can differ
  when it spanned a weight swap).

Rules: every row of a rollout gets the rollout's final reward (``reward_fillna`` when it reported none); an over-long
prompt is cut to its first ``max_prompt_length`` tokens and the row marked for dropping; an over-long response is cut
to its first ``max_response_length`` tokens; rows with no trainable response token are skipped; a rollout without
triplets counts only in the reward metrics. Unlike Agent Lightning, scores are float32, not bfloat16 (bfloat16 turns
a reward of 0.3 into 0.30078).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from verl import DataProto

from agl_bridge.errors import ConfigError, DataError
from agl_bridge.store.triplets import RolloutTriplets, final_reward

__all__ = ["ConvertOptions", "ConvertStats", "to_dataproto"]


@dataclass
class ConvertOptions:
    """Limits and padding. ``None`` lengths mean "the longest in the batch" (no truncation); with ``pad_to_max`` the
    tensors always have exactly ``max_prompt_length`` / ``max_response_length`` columns."""

    pad_token_id: int
    max_prompt_length: int | None = None
    max_response_length: int | None = None
    pad_to_max: bool = False
    reward_fillna: float = 0.0


@dataclass
class ConvertStats:
    """What the conversion did (the trainers log it as ``training/...`` metrics)."""

    n_rollouts: int = 0
    n_rollouts_with_triplets: int = 0
    n_rollouts_with_reward: int = 0
    n_triplets: int = 0
    n_rows: int = 0
    n_prompt_too_long: int = 0
    n_truncated_responses: int = 0
    n_skipped_empty: int = 0
    rewards: list[float] = field(default_factory=list)

    @property
    def reward_mean(self) -> float:
        """Mean final reward over all rollouts (fill value for those without one)."""
        return float(np.mean(self.rewards)) if self.rewards else 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "training/reward": self.reward_mean,
            "training/n_rollouts": self.n_rollouts,
            "training/n_rollouts_w_trace": self.n_rollouts_with_triplets,
            "training/n_rollouts_w_reward": self.n_rollouts_with_reward,
            "training/n_triplets": self.n_triplets,
            "training/n_rows": self.n_rows,
            "training/n_triplets_prompt_too_long": self.n_prompt_too_long,
            "training/n_truncated_triplets": self.n_truncated_responses,
            "training/n_triplets_skipped_empty": self.n_skipped_empty,
        }


@dataclass
class _Row:
    prompt: list[int]
    response: list[int]
    mask: list[int]
    logprobs: list[float] | None
    reward: float
    drop: bool
    group_id: str
    rollout_id: str
    turn_index: int
    resources_version: int


def _rows(rollouts: Sequence[RolloutTriplets], options: ConvertOptions, stats: ConvertStats) -> list[_Row]:
    rows: list[_Row] = []
    max_p, max_r = options.max_prompt_length, options.max_response_length
    for rollout in rollouts:
        stats.n_rollouts += 1
        reward = final_reward(rollout)
        if reward is not None:
            stats.n_rollouts_with_reward += 1
        else:
            reward = options.reward_fillna
        stats.rewards.append(float(reward))
        if rollout.triplets:
            stats.n_rollouts_with_triplets += 1
        if not rollout.group_id:
            raise DataError(f"rollout {rollout.rollout_id} has no group id (GRPO groups rollouts by it)")
        for triplet in rollout.triplets:
            stats.n_triplets += 1
            prompt, response = list(triplet.prompt_token_ids), list(triplet.response_token_ids)
            mask = list(triplet.response_mask)
            # Empty logprobs: not every merged call had them (see agl.v1.Triplet).
            logprobs = list(triplet.logprobs) or None
            if len(mask) != len(response) or (logprobs is not None and len(logprobs) != len(response)):
                raise DataError(f"rollout {rollout.rollout_id}: response mask/logprobs do not match the response ids")
            drop = False
            if max_p is not None and len(prompt) > max_p:
                prompt, drop = prompt[:max_p], True
                stats.n_prompt_too_long += 1
            if max_r is not None and len(response) > max_r:
                response, mask = response[:max_r], mask[:max_r]
                logprobs = logprobs[:max_r] if logprobs is not None else None
                stats.n_truncated_responses += 1
            if not any(mask):
                stats.n_skipped_empty += 1
                continue
            rows.append(
                _Row(
                    prompt,
                    response,
                    mask,
                    logprobs,
                    float(reward),
                    drop,
                    rollout.group_id,
                    rollout.rollout_id,
                    triplet.turn_index,
                    triplet.resources_version,
                )
            )
    stats.n_rows = len(rows)
    return rows


def to_dataproto(
    rollouts: Sequence[RolloutTriplets], options: ConvertOptions, meta_info: dict[str, Any] | None = None
) -> tuple[DataProto, ConvertStats]:
    """Builds the training batch from finished rollouts (see the module doc for keys and rules). Raises
    ``DataError`` when no row is left (a trainer skips such a step)."""
    stats = ConvertStats()
    rows = _rows(rollouts, options, stats)
    if not rows:
        raise DataError(f"no trainable rows in {stats.n_rollouts} rollouts ({stats.n_triplets} triplets)")
    if options.pad_to_max and (options.max_prompt_length is None or options.max_response_length is None):
        raise ConfigError("pad_to_max needs max_prompt_length and max_response_length")
    p_len = options.max_prompt_length if options.pad_to_max else max(len(r.prompt) for r in rows)
    r_len = options.max_response_length if options.pad_to_max else max(len(r.response) for r in rows)
    assert p_len is not None and r_len is not None
    b, pad = len(rows), options.pad_token_id

    # Filled as numpy arrays (a slice assignment from a list is far cheaper than a tensor per row), then wrapped.
    prompts: np.ndarray = np.full((b, p_len), pad, dtype=np.int64)
    responses: np.ndarray = np.full((b, r_len), pad, dtype=np.int64)
    prompt_attn: np.ndarray = np.zeros((b, p_len), dtype=np.int64)
    response_attn: np.ndarray = np.zeros((b, r_len), dtype=np.int64)
    response_mask: np.ndarray = np.zeros((b, r_len), dtype=np.int64)
    scores: np.ndarray = np.zeros((b, r_len), dtype=np.float32)
    log_probs: np.ndarray = np.zeros((b, r_len), dtype=np.float32)
    all_logprobs = all(r.logprobs is not None for r in rows)
    for i, row in enumerate(rows):
        n_p, n_r = len(row.prompt), len(row.response)
        if n_p:
            prompts[i, p_len - n_p :] = row.prompt
            prompt_attn[i, p_len - n_p :] = 1
        responses[i, :n_r] = row.response
        response_attn[i, :n_r] = 1
        response_mask[i, :n_r] = row.mask
        # The reward sits on the last real response token (n_r > 0: empty rows were skipped).
        scores[i, n_r - 1] = row.reward
        if all_logprobs and row.logprobs is not None:
            log_probs[i, :n_r] = row.logprobs
    if all_logprobs:
        log_probs *= response_mask

    attention_mask = torch.from_numpy(np.concatenate([prompt_attn, response_attn], axis=1))
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    tensors: dict[str, torch.Tensor] = {
        "prompts": torch.from_numpy(prompts),
        "responses": torch.from_numpy(responses),
        "input_ids": torch.from_numpy(np.concatenate([prompts, responses], axis=1)),
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": torch.from_numpy(response_mask * response_attn),
        "token_level_scores": torch.from_numpy(scores),
        "is_drop_mask": torch.tensor([r.drop for r in rows], dtype=torch.bool),
    }
    if all_logprobs:
        tensors["rollout_log_probs"] = torch.from_numpy(log_probs)
    group_ids = np.array([r.group_id for r in rows], dtype=object)
    non_tensors = {
        "uid": group_ids,
        "data_id_list": group_ids.copy(),
        "rollout_id_list": np.array([r.rollout_id for r in rows], dtype=object),
        "turn_index_list": np.array([r.turn_index for r in rows], dtype=object),
        "resources_version_list": np.array([r.resources_version for r in rows], dtype=object),
    }
    data = DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=dict(meta_info or {}))
    return data, stats

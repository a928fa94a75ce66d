"""One step of the demo task without store, proxy or runners: ``n`` answers a task sampled from the policy, the
exact-match reward, and the training batch with agl's GRPO advantages — what the loop would build from the store's
triplets. For checks and benches that need many steps quickly (``bench/demo_offline.py``,
``scripts/verl_same_update.py``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch
from verl import DataProto

from agl_bridge.local import tasks as kind
from agl_bridge.local.batching import SampleRequest
from agl_bridge.local.policy import Policy
from agl_bridge.training.advantage import compute_rollout_level_advantage

__all__ = ["kind_batch"]


def kind_batch(
    policy: Policy, batch: list[dict[str, Any]], n: int, *, norm_adv_by_std: bool = True, max_tokens: int = 8
) -> tuple[DataProto, dict[str, list[tuple[float, str]]]]:
    """The step's rows (one GRPO group of ``n`` per task, the engine's log-probs as ``rollout_log_probs``) and, per
    word, each answer's reward and text."""
    tok = policy.tokenizer
    eos, pad = tok.eos_token_id, int(tok.pad_token_id or 0)
    prompts = [policy.encode_chat([{"role": "user", "content": kind.format_prompt(t)}]) for t in batch]
    requests = [SampleRequest(list(p), max_tokens, temperature=1.0) for p in prompts for _ in range(n)]
    outs = policy.generate_batch_sync(requests)
    b, p_len, r_len = len(outs), max(map(len, prompts)), max(len(g.token_ids) for g in outs)
    ids: np.ndarray = np.full((b, p_len + r_len), pad)
    attention: np.ndarray = np.zeros((b, p_len + r_len), dtype=np.int64)
    scores: np.ndarray = np.zeros((b, r_len), np.float32)
    log_probs: np.ndarray = np.zeros((b, r_len), np.float32)
    answers: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for i, g in enumerate(outs):
        task, prompt, k = batch[i // n], prompts[i // n], len(g.token_ids)
        ids[i, p_len - len(prompt) : p_len], ids[i, p_len : p_len + k] = prompt, g.token_ids
        attention[i, p_len - len(prompt) : p_len + k] = 1
        text = tok.decode([t for t in g.token_ids if t != eos], skip_special_tokens=True)
        scores[i, k - 1], log_probs[i, :k] = kind.reward(task, text), g.logprobs
        answers[task["word"]].append((float(scores[i, k - 1]), text))
    mask = torch.from_numpy(attention)
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.from_numpy(ids[:, :p_len]),
            "responses": torch.from_numpy(ids[:, p_len:]),
            "input_ids": torch.from_numpy(ids),
            "attention_mask": mask,
            "position_ids": torch.clamp(mask.cumsum(1) - 1, min=0),
            "response_mask": mask[:, p_len:].clone(),
            "token_level_scores": torch.from_numpy(scores),
            "rollout_log_probs": torch.from_numpy(log_probs),
        },
        non_tensors={
            "uid": np.array([f"task-{i // n}" for i in range(b)], dtype=object),
            "rollout_id_list": np.array([f"rollout-{i}" for i in range(b)], dtype=object),
        },
    )
    data, _ = compute_rollout_level_advantage(data, "grpo", norm_adv_by_std_in_grpo=norm_adv_by_std)
    return data, answers

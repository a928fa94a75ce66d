"""Response log-probs of a batch whose prompts share a long prefix (a few-shot template: 477 of word-math's 505–540
prompt tokens), with that prefix computed once: a forward pass of the prefix at batch 1, its KV cache repeated for
every row, then the rows' own tokens over it. With grad enabled the gradient is exact: the repeated cache's
gradients sum into the one prefix pass, as the rows' would. Each row's tokens sit at the index of their position (no
padding before them), so the values are the row's own forward pass alone, sliding-window layers included.

Rows follow ``training/dataproto``'s layout: prompts left-padded to ``P``, responses right-padded to ``R``."""

from __future__ import annotations

import torch
from verl.utils.torch_functional import logprobs_from_logits

__all__ = ["MIN_SHARED_PREFIX", "response_log_probs", "shared_prompt_prefix"]

# Below this many shared tokens the plain forward pass is used: the saving would not pay for a second pass.
MIN_SHARED_PREFIX = 16


def shared_prompt_prefix(prompts: torch.Tensor, prompt_mask: torch.Tensor) -> int:
    """How many leading real prompt tokens every row shares, leaving each row at least its last prompt token (whose
    logits predict the first response token)."""
    lengths = prompt_mask.sum(-1)
    p_len, shortest = prompts.shape[1], int(lengths.min())
    if prompts.shape[0] < 2 or shortest < 2:
        return 0
    # Each row's real prompt, left-aligned; columns where every row equals the first row's.
    starts = p_len - lengths
    cols = torch.arange(shortest - 1)
    aligned = prompts[torch.arange(prompts.shape[0])[:, None], starts[:, None] + cols[None, :]]
    same = (aligned == aligned[:1]).all(0)
    return int(same.long().cumprod(0).sum())


def response_log_probs(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], temperature: float = 1.0
) -> torch.Tensor:
    """Log-probs [B, R] of ``responses`` at ``temperature`` (with grad when enabled), logits only at the positions
    that predict a response token (a 262k-token vocabulary makes them the pass's largest tensor)."""
    scale = 1.0 / temperature if temperature > 0 else 1.0
    responses, input_ids, mask = batch["responses"], batch["input_ids"], batch["attention_mask"]
    r_len = responses.shape[1]
    p_len = input_ids.shape[1] - r_len
    shared = shared_prompt_prefix(input_ids[:, :p_len], mask[:, :p_len])
    if shared < MIN_SHARED_PREFIX:
        logits = model(
            input_ids=input_ids, attention_mask=mask, position_ids=batch["position_ids"], logits_to_keep=r_len + 1
        ).logits
        return logprobs_from_logits(logits[:, :-1].float() * scale, responses)
    rows = input_ids.shape[0]
    lengths = mask[:, :p_len].sum(-1)
    first = p_len - int(lengths[0])
    prefix = model(input_ids=input_ids[:1, first : first + shared], use_cache=True, logits_to_keep=1)
    past = prefix.past_key_values
    past.batch_repeat_interleave(rows)
    # Each row's own prompt tokens and its response follow the prefix at once, padded on the right: every real
    # token's index is its position, so a sliding-window layer (Gemma's 512) sees exactly what the row alone would.
    own = lengths - shared
    width = int(own.max()) + r_len
    ids = torch.zeros((rows, width), dtype=input_ids.dtype)
    own_mask = torch.zeros((rows, width), dtype=mask.dtype)
    for i in range(rows):
        n = int(own[i])
        ids[i, :n], ids[i, n : n + r_len] = input_ids[i, p_len - n : p_len], responses[i]
        own_mask[i, :n], own_mask[i, n : n + r_len] = 1, mask[i, p_len:]
    # Row i's response tokens are predicted at columns own_i - 1 ... own_i + R - 2.
    lo = int(own.min()) - 1
    keep = torch.arange(lo, int(own.max()) + r_len - 1)
    logits = model(
        input_ids=ids.to(input_ids.device),
        attention_mask=torch.cat([torch.ones((rows, shared), dtype=mask.dtype), own_mask], dim=1).to(mask.device),
        position_ids=(shared + torch.arange(width)).expand(rows, width).to(input_ids.device),
        past_key_values=past,
        use_cache=True,
        logits_to_keep=keep.to(input_ids.device),
    ).logits
    cols = (own[:, None] - 1 - lo + torch.arange(r_len)[None, :]).to(logits.device)
    picked = logits[torch.arange(rows, device=logits.device)[:, None], cols]
    return logprobs_from_logits(picked.float() * scale, responses)

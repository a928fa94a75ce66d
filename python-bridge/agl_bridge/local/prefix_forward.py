"""Response log-probs of a batch whose prompts share a long prefix (a few-shot template: 477 of word-math's 505–540
prompt tokens), with that prefix computed once: a forward pass of the prefix at batch 1, its KV cache repeated for
every row, then the rows' own tokens over it; logits only where a response token is predicted. With grad enabled
the gradient is exact: the repeated cache's gradients sum into the one prefix pass, as the rows' would. Each row's
tokens sit at the index of their position (no padding before them), so the values are the row's own forward pass
alone, sliding-window layers included.

Rows follow ``training/dataproto``'s layout: prompts left-padded to ``P``, responses right-padded to ``R``."""

from __future__ import annotations

import torch

from agl_bridge.local.logits import log_probs_of, logits_at

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
    """Log-probs [B, R] of ``responses`` at ``temperature`` (with grad when enabled; 0 at padded response positions),
    logits only at the positions that predict a response token (``logits_at``)."""
    scale = 1.0 / temperature if temperature > 0 else 1.0
    responses, input_ids, mask = batch["responses"], batch["input_ids"], batch["attention_mask"]
    rows, r_len = responses.shape
    p_len = input_ids.shape[1] - r_len
    # The response tokens to score: row i's k-th is predicted at column start_i - 1 + k of the pass's input.
    row_of, k = mask[:, p_len:].nonzero(as_tuple=True)
    shared = shared_prompt_prefix(input_ids[:, :p_len], mask[:, :p_len])
    if shared < MIN_SHARED_PREFIX:
        with logits_at(model, row_of, p_len - 1 + k):
            logits = model(
                input_ids=input_ids, attention_mask=mask, position_ids=batch["position_ids"], logits_to_keep=0
            ).logits[0]
    else:
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
        with logits_at(model, row_of, own[row_of] - 1 + k):
            logits = model(
                input_ids=ids.to(input_ids.device),
                attention_mask=torch.cat([torch.ones((rows, shared), dtype=mask.dtype), own_mask], dim=1).to(
                    mask.device
                ),
                position_ids=(shared + torch.arange(width)).expand(rows, width).to(input_ids.device),
                past_key_values=past,
                use_cache=True,
                logits_to_keep=0,
            ).logits[0]
    scored = log_probs_of(logits.float() * scale, responses[row_of, k].to(logits.device))
    return scored.new_zeros((rows, r_len)).index_put((row_of.to(scored.device), k.to(scored.device)), scored)

"""Sampling many requests in one batch: left-padded prompts, one forward pass per new token for the whole batch,
with a KV cache (the prompts' shared prefix, a few-shot template, computed once), each row stopping on its own (EOS,
stop ids, stop strings, ``max_tokens``) and leaving the batch then. A model with sliding-window layers gets
attention masks by position, so a row padded after the shared prefix sees what it would alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

__all__ = ["Generation", "SampleRequest", "sample_batch"]


@dataclass
class Generation:
    """What the engine sampled: ids, their logprobs under the model (before temperature, like vLLM's default raw
    logprobs) and why it stopped (``stop``: an EOS or stop token, or a stop string — ``stop_text``, which the text
    returned leaves out, as vLLM's does, while the ids keep every sampled token; ``length``: ``max_tokens``)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    stop_text: str | None = None


@dataclass
class SampleRequest:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop_ids: frozenset[int] = frozenset()
    stop_texts: tuple[str, ...] = ()
    seed: int | None = None
    out: Generation = field(default_factory=lambda: Generation([], [], "length"))


def _pick(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


def _stop_text(tokenizer: PreTrainedTokenizerBase, req: SampleRequest) -> str | None:
    if not req.stop_texts:
        return None
    text = tokenizer.decode(req.out.token_ids, skip_special_tokens=True)
    return next((s for s in req.stop_texts if s in text), None)


# A prefix every prompt of a batch shares (a few-shot template) is computed once when it is at least this long.
MIN_SHARED_PREFIX = 16


def _sliding_window(model: torch.nn.Module) -> int | None:
    """The model's attention window when some of its layers use one (Gemma 3: 512 tokens, 5 layers in 6)."""
    config = getattr(model, "config", None)
    window = getattr(config, "sliding_window", None)
    return window if window and "sliding_attention" in (getattr(config, "layer_types", None) or ()) else None


def _position_masks(
    kv_pos: torch.Tensor, kv_real: torch.Tensor, q_pos: torch.Tensor, window: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Additive attention masks [B, 1, Q, KV] by position, not by index: a query sees the real keys at or before its
    position, and a sliding-window layer those fewer than ``window`` positions back. HF's masks count indices, and the
    pads between the shared prefix and a shorter row's own tokens would then fill part of the row's window."""
    seen = kv_real[:, None, :] & (kv_pos[:, None, :] <= q_pos[:, :, None])
    near = seen & (q_pos[:, :, None] - kv_pos[:, None, :] < window)
    low = torch.finfo(dtype).min

    def additive(allowed: torch.Tensor) -> torch.Tensor:
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, low)[:, None]

    return {"full_attention": additive(seen), "sliding_attention": additive(near)}


def _shared_prefix(model: torch.nn.Module, prompts: list[list[int]], device: torch.device) -> tuple[Any, int]:
    """The KV cache of the prompts' common prefix, repeated for every row, and its length (0 and a new cache when
    not worth it). Each row keeps at least its last prompt token, whose logits start its answer. The cache keeps
    every key (no sliding-window trimming, which goes by index): the masks select by position."""
    shared = min(len(p) for p in prompts) - 1
    first = prompts[0]
    for p in prompts[1:]:
        shared = next((k for k in range(shared) if p[k] != first[k]), shared)
    cache = DynamicCache()
    if len(prompts) < 2 or shared < MIN_SHARED_PREFIX:
        return cache, 0
    model(
        input_ids=torch.tensor([first[:shared]], device=device), past_key_values=cache, use_cache=True, logits_to_keep=1
    )
    cache.batch_repeat_interleave(len(prompts))
    return cache, shared


@torch.no_grad()
def sample_batch(
    model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, requests: list[SampleRequest], pad_id: int
) -> list[Generation]:
    """Samples every request's answer in one batch; each request's ``out`` is filled and returned. Logits are
    computed for the last position only (a 262k-token vocabulary makes them the largest tensor of the pass)."""
    eos = tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if generation_eos is not None:
        eos_ids |= set(generation_eos if isinstance(generation_eos, list) else [generation_eos])
    device = next(model.parameters()).device
    max_new = max(r.max_tokens for r in requests)
    past, shared = _shared_prefix(model, [r.prompt_ids for r in requests], device)
    window = _sliding_window(model)
    width = max(len(r.prompt_ids) - shared for r in requests)
    ids = torch.full((len(requests), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(requests), width), dtype=torch.long)
    for i, r in enumerate(requests):
        ids[i, width - len(r.prompt_ids) + shared :] = torch.tensor(r.prompt_ids[shared:], dtype=torch.long)
        mask[i, width - len(r.prompt_ids) + shared :] = 1
    # Pads sit between the shared prefix and each row's own tokens: masked, and not counted in the positions.
    positions = shared + (mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([torch.ones((len(requests), shared), dtype=torch.long), mask], dim=1)
    kv_pos = torch.cat([torch.arange(shared).expand(len(requests), shared), positions], dim=1)
    dtype = next(model.parameters()).dtype
    generators = [torch.Generator().manual_seed(r.seed) if r.seed is not None else None for r in requests]
    # The rows still sampling, as indices into requests; a row that stops leaves the batch (and the cache), so the
    # passes after it cost what the rows still going need.
    rows = list(range(len(requests)))
    for step in range(max_new):
        attention: Any = mask.to(device)
        if window:
            masks = _position_masks(kv_pos, mask.bool(), positions, window, dtype)
            attention = {kind: m.to(device) for kind, m in masks.items()}
        out = model(
            input_ids=ids.to(device),
            attention_mask=attention,
            position_ids=positions.to(device),
            past_key_values=past,
            use_cache=True,
            logits_to_keep=1,
        )
        past = out.past_key_values
        logits = out.logits[:, -1].float().cpu()
        logp = torch.log_softmax(logits, dim=-1)
        going: list[int] = []
        tokens: list[int] = []
        for b, i in enumerate(rows):
            r = requests[i]
            token = _pick(logits[b], r.temperature, r.top_p, generators[i])
            r.out.token_ids.append(token)
            r.out.logprobs.append(float(logp[b, token]))
            if token in eos_ids or token in r.stop_ids:
                r.out.finish_reason = "stop"
            elif (matched := _stop_text(tokenizer, r)) is not None:
                r.out.finish_reason, r.out.stop_text = "stop", matched
            elif step + 1 < r.max_tokens:
                going.append(b)
                tokens.append(token)
        if not going:
            break
        if len(going) < len(rows):
            keep = torch.tensor(going)
            past.batch_select_indices(keep.to(device))
            mask, positions, kv_pos = mask[keep], positions[keep], kv_pos[keep]
            rows = [rows[b] for b in going]
        ids = torch.tensor(tokens, dtype=torch.long)[:, None]
        mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
        positions = positions[:, -1:] + 1
        kv_pos = torch.cat([kv_pos, positions], dim=1)
    return [r.out for r in requests]

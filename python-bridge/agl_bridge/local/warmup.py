"""Supervised warm-up on the answer format (a few hundred cross-entropy steps on the assistant tokens)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from agl_bridge.local.policy import Policy

__all__ = ["warmup"]


def warmup(
    policy: Policy, pairs: Sequence[tuple[str, str]], steps: int, batch_size: int = 32, lr: float = 3e-3, seed: int = 0
) -> float:
    """Trains ``policy.model`` to answer each user prompt with its answer then EOS; returns the last loss. Runs on the
    calling thread (before the policy server starts)."""
    tok, model = policy.tokenizer, policy.model
    rng = random.Random(seed)
    examples = []
    for prompt, answer in pairs:
        p = policy.encode_chat([{"role": "user", "content": prompt}])
        a = list(tok.encode(answer, add_special_tokens=False)) + [tok.eos_token_id]
        examples.append((p, a))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        batch = rng.sample(examples, min(batch_size, len(examples)))
        width = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, a) in enumerate(batch):
            seq = p + a
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(a)
            attn[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
    model.eval()
    return loss_value

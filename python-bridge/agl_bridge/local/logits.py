"""Logits at chosen positions only, and log-probs from them.

A 262k-token vocabulary (Gemma 3) makes the output head the largest matmul of a pass: 168 M multiply-adds per
position, more than the rest of Gemma 3 270M's layers together. ``logits_to_keep`` can only keep the same columns of
every row, so rows whose responses start at different columns (rows of different lengths after a shared prefix)
would keep a window several times wider than their responses. ``logits_at`` hands the output head only the
``(row, column)`` hidden states asked for, inside the model's own forward (so FSDP's hooks, the final norm and any
logit soft-capping run as they would)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["log_probs_of", "logits_at"]


def log_probs_of(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] for every row at once (``logits_labels - logsumexp``, VERL's own formula; in fp32
    at least, where VERL's row loop takes log_softmax for bf16 because logsumexp is unstable there)."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    return torch.gather(logits, -1, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@contextmanager
def logits_at(model: torch.nn.Module, rows: torch.Tensor, cols: torch.Tensor) -> Iterator[None]:
    """Inside, a forward pass of ``model`` with ``logits_to_keep=0`` returns logits ``[1, K, V]``: those of the
    hidden states at ``(rows[k], cols[k])`` of its input, in that order."""
    head = model.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings to compute chosen positions' logits with")

    def pick(_module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        hidden = args[0]
        return (hidden[rows.to(hidden.device), cols.to(hidden.device)].unsqueeze(0), *args[1:])

    handle = head.register_forward_pre_hook(pick)
    try:
        yield
    finally:
        handle.remove()

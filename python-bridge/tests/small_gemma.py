"""A small Gemma 3 built from its config for the tests of the real-model code paths: sliding-window and full
attention layers, as Gemma 3 270M has (window 24 here, so short rows already reach past it)."""

from __future__ import annotations

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig


def small_gemma(vocab_size: int, layers: list[str], attn: str, window: int = 24) -> torch.nn.Module:
    """A seeded fp32 model with ``layers`` (``sliding_attention`` / ``full_attention``) and attention ``attn``."""
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=len(layers),
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=window,
        layer_types=layers,
        max_position_embeddings=256,
        attn_implementation=attn,
    )
    return Gemma3ForCausalLM(config).float()

"""Small causal LMs for the local trainer: built from a config with a word-level tokenizer made locally (no hub
download), or loaded from a GGUF file or a directory (``save_pretrained`` output, any Hugging Face causal LM)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from agl_bridge.local.pretrained import load_pretrained

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "TinyModelConfig",
    "build_tiny_model",
    "build_word_tokenizer",
    "load_model",
]

PAD, UNK, END = "<pad>", "<unk>", "<|end|>"
SPECIAL_TOKENS = [PAD, UNK, "<|system|>", "<|user|>", "<|assistant|>", END]
# Role markers and <|end|> are words of their own, so a chat renders to whitespace-separated words.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_word_tokenizer(words: Iterable[str]) -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer over the given words plus the chat special tokens, with a chat template;
    ``<|end|>`` ends an assistant turn (it is the EOS token)."""
    vocab: dict[str, int] = {}
    for word in [*SPECIAL_TOKENS, *words]:
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=END,
        additional_special_tokens=SPECIAL_TOKENS[2:5],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@dataclass
class TinyModelConfig:
    """Size of a model built from scratch (a Llama architecture)."""

    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    intermediate_size: int = 128
    max_positions: int = 128
    seed: int = 0


def build_tiny_model(tokenizer: PreTrainedTokenizerFast, config: TinyModelConfig | None = None) -> LlamaForCausalLM:
    """A randomly initialised Llama causal LM sized for ``tokenizer`` (float32, CPU)."""
    cfg = config or TinyModelConfig()
    torch.manual_seed(cfg.seed)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.heads,
        max_position_embeddings=cfg.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(llama).float()


def load_model(
    path: str | Path, dtype: str | None = None, chat_template: str | None = None
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """A causal LM and its tokenizer from a GGUF file or a local directory, on CPU (``load_pretrained``: float32
    unless ``dtype`` says bfloat16). ``/v1/chat/completions`` needs a chat template: the tokenizer's or
    ``chat_template``."""
    return load_pretrained(path, dtype, chat_template)

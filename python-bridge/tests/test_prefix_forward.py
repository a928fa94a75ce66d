"""The update's shared-prefix forward pass (``local/prefix_forward``) gives the plain forward pass's log-probs and
gradients, on a small Gemma 3 (sliding and full attention layers, as the real one) built from its config."""

from __future__ import annotations

import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig
from verl.utils.torch_functional import logprobs_from_logits

from agl_bridge.local.prefix_forward import MIN_SHARED_PREFIX, response_log_probs, shared_prompt_prefix


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=128,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=256,
        attn_implementation="eager",
    )
    return Gemma3ForCausalLM(config).float()


def _batch(prefix_len: int) -> dict[str, torch.Tensor]:
    """Four rows in ``training/dataproto``'s layout: prompts (BOS, the shared prefix, their own tokens) left-padded,
    responses right-padded."""
    g = torch.Generator().manual_seed(1)
    prefix = torch.randint(3, 97, (prefix_len,), generator=g).tolist()
    rows = [
        ([2, *prefix, *torch.randint(3, 97, (own,), generator=g).tolist()], torch.randint(3, 97, (r,), generator=g))
        for own, r in [(5, 4), (9, 2), (1, 6), (7, 6)]
    ]
    p_len, r_len = max(len(p) for p, _ in rows), max(len(r) for _, r in rows)
    ids = torch.zeros((len(rows), p_len + r_len), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (prompt, response) in enumerate(rows):
        ids[i, p_len - len(prompt) : p_len] = torch.tensor(prompt)
        ids[i, p_len : p_len + len(response)] = response
        mask[i, p_len - len(prompt) : p_len + len(response)] = 1
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": (mask.cumsum(1) - 1).clamp(min=0),
        "responses": ids[:, p_len:],
        "response_mask": mask[:, p_len:],
    }


def _plain(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    r_len = batch["responses"].shape[1]
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=r_len + 1,
    ).logits
    return logprobs_from_logits(logits[:, :-1].float(), batch["responses"])


def _grads(model: torch.nn.Module, logp: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    ((logp * mask).sum() / mask.sum()).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_the_shared_prefix_is_the_rows_common_real_prompt():
    batch = _batch(20)
    p_len = batch["input_ids"].shape[1] - batch["responses"].shape[1]
    # BOS and the 20 shared tokens; the row with one token of its own keeps it.
    assert shared_prompt_prefix(batch["input_ids"][:, :p_len], batch["attention_mask"][:, :p_len]) == 21
    assert shared_prompt_prefix(batch["input_ids"][:1, :p_len], batch["attention_mask"][:1, :p_len]) == 0


@pytest.mark.parametrize("prefix_len", [30, 4])
def test_log_probs_and_gradients_equal_the_plain_forward_pass(prefix_len):
    model = _model().train()
    batch = _batch(prefix_len)
    mask = batch["response_mask"].float()
    plain = _plain(model, batch)
    plain_grads = _grads(model, plain, mask)
    shared = response_log_probs(model, batch)
    shared_grads = _grads(model, shared, mask)
    assert (prefix_len + 1 >= MIN_SHARED_PREFIX) == (prefix_len == 30)
    torch.testing.assert_close(shared * mask, plain * mask, atol=1e-5, rtol=1e-4)
    assert shared_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)

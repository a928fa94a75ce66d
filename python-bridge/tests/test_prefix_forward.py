"""The update's shared-prefix forward pass (``local/prefix_forward``) gives each row's own forward pass: its
log-probs and the summed gradients, on a small Gemma 3 built from its config whose rows are longer than its sliding
window (as the real one's: 512 tokens, a word-math prompt 500-540); and the policy server's batched sampling gives
each prompt's own, shared prefix or not."""

from __future__ import annotations

import types

import pytest
import torch
from small_gemma import small_gemma
from verl.utils.torch_functional import logprobs_from_logits

from agl_bridge.local.batching import SampleRequest, sample_batch
from agl_bridge.local.prefix_forward import MIN_SHARED_PREFIX, response_log_probs, shared_prompt_prefix


def _model() -> torch.nn.Module:
    return small_gemma(97, ["sliding_attention", "sliding_attention", "full_attention"], "eager")


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


def _alone(model: torch.nn.Module, batch: dict[str, torch.Tensor], temperature: float) -> torch.Tensor:
    """Each row's response log-probs at ``temperature`` from a forward pass of that row alone, without padding."""
    out = torch.zeros(batch["responses"].shape)
    p_len = batch["input_ids"].shape[1] - batch["responses"].shape[1]
    for i, row in enumerate(batch["input_ids"]):
        real = batch["attention_mask"][i].bool()
        ids = row[real][None]
        n_r = int(batch["attention_mask"][i, p_len:].sum())
        logits = model(input_ids=ids, logits_to_keep=n_r + 1).logits
        out[i, :n_r] = logprobs_from_logits(logits[:, :-1].float() / temperature, ids[:, -n_r:])[0]
    return out


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


@pytest.mark.parametrize(("prefix_len", "temperature"), [(30, 1.0), (30, 0.7), (4, 0.7)])
def test_log_probs_and_gradients_equal_each_rows_own_forward_pass(prefix_len, temperature):
    model = _model().train()
    batch = _batch(prefix_len)
    mask = batch["response_mask"].float()
    plain = _alone(model, batch, temperature)
    plain_grads = _grads(model, plain, mask)
    shared = response_log_probs(model, batch, temperature)
    shared_grads = _grads(model, shared, mask)
    assert (prefix_len + 1 >= MIN_SHARED_PREFIX) == (prefix_len == 30)
    torch.testing.assert_close(shared * mask, plain * mask, atol=1e-5, rtol=1e-4)
    assert shared_grads.keys() == plain_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


@pytest.mark.parametrize("window", [24, 128])
def test_batched_sampling_equals_each_prompt_alone(window):
    # Prompts longer than the window are left-padded whole (no shared prefix); shorter ones share it.
    model = _model().eval()
    model.config.sliding_window = window
    tokenizer = types.SimpleNamespace(eos_token_id=1, decode=lambda ids, **_: "")
    g = torch.Generator().manual_seed(2)
    prefix = torch.randint(3, 97, (20,), generator=g).tolist()
    prompts = [[2, *prefix, *torch.randint(3, 97, (n,), generator=g).tolist()] for n in (3, 8, 1)]

    def requests() -> list[SampleRequest]:
        # Rows stop at different steps, leaving the batch (and its cache) while the others go on.
        return [SampleRequest(list(p), n, temperature=0) for p, n in zip(prompts, (6, 2, 4), strict=True)]

    batched = sample_batch(model, tokenizer, requests(), pad_id=0)
    for request, out in zip(requests(), batched, strict=True):
        alone = sample_batch(model, tokenizer, [request], pad_id=0)[0]
        assert out.token_ids == alone.token_ids and len(out.token_ids) == request.max_tokens
        torch.testing.assert_close(torch.tensor(out.logprobs), torch.tensor(alone.logprobs), atol=1e-5, rtol=1e-5)

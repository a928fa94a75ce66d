"""agl's CPU language-model engine (``verl/cpu_engine``) against VERL's own ``FSDPEngineWithLMHead``: with logits
computed only over the columns that predict response tokens and a shared prompt prefix computed once (rows longer
than the model's sliding window), the log-probs and entropy at every response position,
and their gradients, equal VERL's full-vocabulary pass over every position. VERL's own code builds the micro-batch
(``left_right_2_no_padding``) and reads the outputs (``no_padding_2_padding``); the model is a small Gemma 3."""

from __future__ import annotations

import types

import pytest
import torch
from small_gemma import small_gemma
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

from agl_bridge.verl.cpu_engine import CpuLMHeadEngine, _PrefixOnce


def _model() -> torch.nn.Module:
    return small_gemma(131, ["sliding_attention", "full_attention"], "sdpa").train()


def _micro_batch(shared: int = 20) -> TensorDict:
    """Three rows, VERL's left-right padded layout: prompts of ``shared`` common tokens (a template) and 5, 11 and 8
    of their own; responses of 3, 6 and 1."""
    g = torch.Generator().manual_seed(3)
    template = torch.randint(2, 131, (shared,), generator=g)
    shapes = [(shared + 5, 3), (shared + 11, 6), (shared + 8, 1)]
    p_len, r_len = max(p for p, _ in shapes), max(r for _, r in shapes)
    prompts = torch.zeros((3, p_len), dtype=torch.long)
    responses = torch.zeros((3, r_len), dtype=torch.long)
    mask = torch.zeros((3, p_len + r_len), dtype=torch.long)
    for i, (p, r) in enumerate(shapes):
        prompts[i, p_len - p :] = torch.cat([template, torch.randint(2, 131, (p - shared,), generator=g)])
        responses[i, :r] = torch.randint(2, 131, (r,), generator=g)
        mask[i, p_len - p : p_len + r] = 1
    data = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": mask,
            "position_ids": (mask.cumsum(1) - 1).clamp(min=0),
            "response_mask": mask[:, p_len:],
        },
        batch_size=3,
    )
    data = left_right_2_no_padding(data)
    for key, value in {"use_remove_padding": False, "calculate_entropy": True, "temperature": 0.7}.items():
        tu.assign_non_tensor_data(data, key, value)
    return data


def _engine(cls: type[FSDPEngineWithLMHead]) -> FSDPEngineWithLMHead:
    # The attributes the padded path reads (the rest of an engine is FSDP and optimizer state, not used here).
    engine = object.__new__(cls)
    engine.pad_to_length = None
    engine.engine_config = types.SimpleNamespace(entropy_checkpointing=False)
    return engine


def _responses(engine: FSDPEngineWithLMHead, model: torch.nn.Module, data: TensorDict) -> dict[str, torch.Tensor]:
    inputs, args = engine.prepare_model_inputs(data)
    # As CpuLMHeadEngine.forward_step calls the module (VERL's forward_step, use_cache=False).
    out = engine.prepare_model_outputs(_PrefixOnce(model)(**inputs, use_cache=False), args, data, None)
    return {k: no_padding_2_padding(v, data) for k, v in out.items()}


def _grads(model: torch.nn.Module, out: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    ((out["log_probs"] + 0.1 * out["entropy"]) * mask).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("shared", [20, 0])
def test_response_log_probs_entropy_and_gradients_equal_verls_full_pass(shared):
    model, data = _model(), _micro_batch(shared)
    mask = (
        data["response_mask"].to_padded_tensor(0).float()
        if data["response_mask"].is_nested
        else data["response_mask"].float()
    )
    theirs = _responses(_engine(FSDPEngineWithLMHead), model, data)
    their_grads = _grads(model, theirs, mask)
    inputs, _ = _engine(CpuLMHeadEngine).prepare_model_inputs(data)
    # Columns from row 0's last prompt token to row 1's last response token but one; the template, once.
    assert inputs["logits_to_keep"].tolist() == list(range(shared + 4, shared + 16))
    assert inputs["agl_shared_prefix"] == shared
    # Without grad (the old log-prob pass) the template runs once; with grad (the update) in the same pass as the rest.
    with torch.no_grad():
        once = _responses(_engine(CpuLMHeadEngine), model, data)
    ours = _responses(_engine(CpuLMHeadEngine), model, data)
    our_grads = _grads(model, ours, mask)
    for key in ("log_probs", "entropy"):
        torch.testing.assert_close(once[key] * mask, theirs[key].detach() * mask, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours[key] * mask, theirs[key] * mask, atol=1e-5, rtol=1e-5)
    assert our_grads.keys() == their_grads.keys()
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_other_paths_are_verls():
    data = _micro_batch()
    tu.assign_non_tensor_data(data, "use_fused_kernels", True)
    inputs, args = _engine(CpuLMHeadEngine).prepare_model_inputs(data)
    assert "logits_to_keep" not in inputs and "agl_response_window" not in args

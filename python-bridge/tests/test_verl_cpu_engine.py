"""agl's CPU language-model engine (``verl/cpu_engine``) against VERL's own ``FSDPEngineWithLMHead``: with logits
computed only at the positions that predict response tokens and a shared prompt prefix computed once (rows longer
than the model's sliding window), the log-probs and entropy at every response position,
and their gradients, equal VERL's full-vocabulary pass over every position; under FSDP2 (VERL's ``apply_fsdp2`` on a
one-rank gloo group) the prefix's gradient too, through gradient accumulation and an optimizer step. VERL's own code
builds the micro-batch (``left_right_2_no_padding``) and reads the outputs (``no_padding_2_padding``); the model is a
small Gemma 3."""

from __future__ import annotations

import types

import pytest
import torch
import torch.distributed as dist
from small_gemma import small_gemma
from tensordict import TensorDict
from torch.distributed.device_mesh import init_device_mesh
from verl.utils import tensordict_utils as tu
from verl.utils.fsdp_utils import apply_fsdp2
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

from agl_bridge.verl.cpu_engine import CpuLMHeadEngine, _PrefixOnce, _unsharded_until_step


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


def _mask(data: TensorDict) -> torch.Tensor:
    mask = data["response_mask"]
    return (mask.to_padded_tensor(0) if mask.is_nested else mask).float()


def _loss(out: dict[str, torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    return ((out["log_probs"] + 0.1 * out["entropy"]) * mask).sum()


def _grads(model: torch.nn.Module, out: dict[str, torch.Tensor], mask: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    _loss(out, mask).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("shared", [20, 0])
def test_response_log_probs_entropy_and_gradients_equal_verls_full_pass(shared):
    model, data = _model(), _micro_batch(shared)
    mask = _mask(data)
    theirs = _responses(_engine(FSDPEngineWithLMHead), model, data)
    their_grads = _grads(model, theirs, mask)
    inputs, _ = _engine(CpuLMHeadEngine).prepare_model_inputs(data)
    # The output head sees each row's columns that predict its response tokens only; the template runs once.
    rows, cols = inputs["agl_pick"]
    assert rows.tolist() == [0] * 3 + [1] * 6 + [2]
    assert (cols - shared).tolist() == [4, 5, 6, 10, 11, 12, 13, 14, 15, 7]
    assert inputs["agl_shared_prefix"] == shared
    # The template runs once, without grad (the old log-prob pass) and with it (the update).
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
    assert "agl_pick" not in inputs and "agl_response_positions" not in args


def test_prefix_gradient_under_fsdp2_through_accumulation_and_a_step(tmp_path):
    """VERL's update path: two micro-batches accumulated (the first without gradient sync, as VERL's engine defers it),
    an optimizer step, and the next forward; FSDP2 against the same model unwrapped. Without keeping the parameters
    gathered through the backward, the prefix pass's backward finds them freed."""
    data = _micro_batch()
    mask = _mask(data)
    plain, wrapped = _model(), _model()
    for m in (plain, wrapped):
        m.get_input_embeddings().weight.requires_grad_(False)  # agl_freeze_embeddings: the first layer's input
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        apply_fsdp2(wrapped, {"mesh": init_device_mesh("cpu", (1,)), "reshard_after_forward": True}, {})
        engine = _engine(CpuLMHeadEngine)

        def loss(model: torch.nn.Module) -> torch.Tensor:
            return _loss(_responses(engine, model, data), mask)

        with _unsharded_until_step(wrapped):
            wrapped.set_requires_gradient_sync(False)
            loss(wrapped).backward()
            wrapped.set_requires_gradient_sync(True)
            loss(wrapped).backward()
        (2 * loss(plain)).backward()
        theirs = {n: p.grad for n, p in plain.named_parameters() if p.grad is not None}
        ours = {n: p.grad.full_tensor() for n, p in wrapped.named_parameters() if p.grad is not None}
        assert ours.keys() == theirs.keys()
        for name, grad in theirs.items():
            torch.testing.assert_close(ours[name], grad, atol=1e-5, rtol=1e-4, msg=name)
        for m in (plain, wrapped):
            torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1).step()
        with torch.no_grad():
            torch.testing.assert_close(loss(wrapped), loss(plain), atol=1e-4, rtol=1e-5)
        with pytest.raises(RuntimeError, match="storage of size 0"):
            loss(wrapped).backward()
    finally:
        dist.destroy_process_group()

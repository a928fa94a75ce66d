"""VERL's FSDP language-model engine on CPU, with two changes a real model needs there.

- **Logits only where the loss reads them.** VERL 0.9.1's ``FSDPEngineWithLMHead`` computes full-vocabulary logits
  at every position of every row and takes log-probs over the whole sequence, of which the actor's loss and the old
  log-prob pass read only the response positions (``no_padding_2_padding``). With Gemma 3's 262k-token vocabulary
  that is 262k × ~500 positions × rows: 4 GiB of logits for 8 rows, and most of a CPU step. Here the output head
  sees only the hidden states that predict a response token (``local/logits.logits_at``) and the log-probs (and
  entropy) of each row's response positions are placed where VERL's full-length outputs have them, zeros elsewhere.
  Only the padded path (CPU's ``use_remove_padding: false``) without fused kernels, distillation or Σπ² is changed;
  anything else is VERL's.
- **The shared prompt prefix computed once.** A few-shot template is most of every row's prompt (477 of 505–540
  tokens on word-math). The rows of a micro-batch start together (right-padded), so their common leading tokens run
  through the model once, at batch 1, and the rest of each row runs over that KV cache repeated for every row; the
  gradient of the repeated cache sums into the one prefix pass, as the rows' would, and each token keeps its index
  = its position, so sliding-window layers see what they would (``local/prefix_forward`` does the same for the local
  trainer). In the update too: FSDP2 frees a layer's unsharded parameters after the rows' backward through it, and
  the prefix pass's own backward, reached later through the cache (which FSDP2's pre-backward hooks do not see),
  would find them gone; so the update keeps them unsharded until its last backward (``_unsharded_until_step``: one
  more copy of the weights for the length of a mini-batch on the one-rank CPU mesh), then reshards, so that the next
  forward gathers the weights the optimizer stepped.
- **Frozen input embeddings**, which VERL has no option for: ``+actor_rollout_ref.model.override_config.
  agl_freeze_embeddings=true`` (VERL copies ``override_config`` into the HF config, which the engine reads) leaves
  the input embedding (and Gemma's output head tied to it) untrained, as the local trainer's ``--freeze-embeddings``
  does. FSDP2 shards frozen parameters like any other; the optimizer skips them (no grad), so the CPU replica's
  changed-only weight push leaves them behind (383 of 1,663 MiB for Gemma 3 270M).
- **On-policy updates without an old log-prob pass.** When the update is one pass over one mini-batch, the old
  log-probs are the update's own (PPO's ratio is 1), and VERL's separate no-grad pass over every row
  (``_compute_old_log_prob``, a fifth of a CPU step) computes nothing new: ``VerlBackend`` then sends the rows without
  ``old_log_probs`` and the update's loss takes its own log-probs, detached, in their place — what VERL's older
  ``dp_actor`` did for ``on_policy`` and the local trainer does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode
from verl.workers.engine.fsdp import transformer_impl
from verl.workers.utils.padding import response_from_nested

from agl_bridge.local.logits import log_probs_of, logits_at

__all__ = ["FREEZE_EMBEDDINGS", "CpuLMHeadEngine", "on_policy_loss", "response_columns"]

# The HF config attribute (set through VERL's model.override_config) that freezes the input embeddings.
FREEZE_EMBEDDINGS = "agl_freeze_embeddings"
# Below this many shared leading tokens a micro-batch runs in one pass: a second pass would not pay for itself.
MIN_SHARED_PREFIX = 16
# The model-input keys that carry the shared prefix length and the (row, column) positions whose logits are needed
# from prepare_model_inputs to the module call.
_SHARED = "agl_shared_prefix"
_PICK = "agl_pick"


def response_columns(micro_batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's prompt and response lengths, as VERL's ``no_padding_2_padding`` reads them."""
    prompts, responses = micro_batch["prompts"], micro_batch["responses"]
    if prompts.is_nested:
        return prompts.offsets().diff(), responses.offsets().diff()
    mask = micro_batch["attention_mask"]
    return mask[:, : prompts.shape[1]].sum(1), mask[:, prompts.shape[1] :].sum(1)


def _applies(micro_batch: Any) -> bool:
    flags = ("use_remove_padding", "use_fused_kernels", "distillation_use_topk", "calculate_sum_pi_squared")
    return not any(tu.get_non_tensor_data(data=micro_batch, key=k, default=False) for k in flags) and (
        tu.get_non_tensor_data(data=micro_batch, key="pad_mode", default=DatasetPadMode.NO_PADDING)
        == DatasetPadMode.NO_PADDING
    )


@contextmanager
def _unsharded_until_step(module: torch.nn.Module) -> Iterator[None]:
    """Keep every FSDP2 unit's gathered parameters through the backward passes inside, resharding at the end.

    Without it a backward through the shared prefix fails ("setStorage: ... out of bounds for storage of size 0"):
    the rows' backward through a layer reshards it before the prefix pass's backward through the same layer runs."""
    units = [m for m in module.modules() if isinstance(m, FSDPModule)]
    for unit in units:
        unit.set_reshard_after_backward(False)
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
            unit.set_reshard_after_backward(True)


def on_policy_loss(loss_function: Any) -> Any:
    """``loss_function`` (VERL's ``ppo_loss``) for a micro-batch sent without ``old_log_probs``: the model output's
    own log-probs, detached, stand in for them (one pass over one mini-batch: the module doc)."""

    def with_own_old_log_probs(model_output: dict[str, Any], data: Any, dp_group: Any = None) -> Any:
        data["old_log_probs"] = response_from_nested(model_output["log_probs"].detach(), data["response_mask"])
        return loss_function(model_output=model_output, data=data, dp_group=dp_group)

    return with_own_old_log_probs


class _PrefixOnce:
    """The engine's module, called as VERL's ``forward_step`` calls it; with ``agl_shared_prefix`` in the inputs, the
    prefix runs once and the rows' rest over its repeated KV cache (the module doc). With grad, only inside
    ``_unsharded_until_step`` on an FSDP2 module."""

    def __init__(self, module: torch.nn.Module):
        self.module = module

    def __call__(self, **inputs: Any) -> Any:
        shared = inputs.pop(_SHARED, 0)
        rows, cols = inputs.pop(_PICK, (None, None))
        if rows is None:
            return self.module(**inputs)
        if not shared:
            with logits_at(self.module, rows, cols):
                return self.module(**inputs)
        ids, positions = inputs["input_ids"], inputs["position_ids"]
        past = self.module(
            input_ids=ids[:1, :shared], position_ids=positions[:1, :shared], use_cache=True, logits_to_keep=1
        ).past_key_values
        past.batch_repeat_interleave(ids.shape[0])
        with logits_at(self.module, rows, cols - shared):
            return self.module(
                input_ids=ids[:, shared:],
                attention_mask=inputs["attention_mask"],
                position_ids=positions[:, shared:],
                past_key_values=past,
                use_cache=True,
                logits_to_keep=0,
            )


def _shared_prefix(input_ids: torch.Tensor, prompt_lens: torch.Tensor) -> int:
    """The right-padded rows' common leading tokens, leaving each row its last prompt token."""
    limit = int(prompt_lens.min()) - 1
    if input_ids.shape[0] < 2 or limit < MIN_SHARED_PREFIX:
        return 0
    same = (input_ids[:, :limit] == input_ids[:1, :limit]).all(0)
    shared = int(same.long().cumprod(0).sum())
    return shared if shared >= MIN_SHARED_PREFIX else 0


class CpuLMHeadEngine(transformer_impl.FSDPEngineWithLMHead):
    """``FSDPEngineWithLMHead`` with logits at response positions only, the shared prompt prefix computed once and
    optionally frozen input embeddings (the module doc)."""

    def forward_backward_batch(self, data: Any, loss_function: Any, forward_only: bool = False) -> Any:
        if forward_only:
            return super().forward_backward_batch(data, loss_function, forward_only)
        with _unsharded_until_step(self.module):
            return super().forward_backward_batch(data, loss_function, forward_only)

    def forward_step(self, micro_batch: Any, loss_function: Any, forward_only: bool) -> Any:
        module: torch.nn.Module = self.module  # type: ignore[has-type]  # set by VERL's untyped engine
        if loss_function is not None and not forward_only and "old_log_probs" not in micro_batch.keys():
            loss_function = on_policy_loss(loss_function)
        self.module = _PrefixOnce(module)
        try:
            return super().forward_step(micro_batch, loss_function, forward_only)
        finally:
            self.module = module

    def _build_module(self) -> torch.nn.Module:
        module = super()._build_module()
        if getattr(self.model_config.hf_config, FREEZE_EMBEDDINGS, False):
            module.get_input_embeddings().weight.requires_grad_(False)
        return module

    def prepare_model_inputs(self, micro_batch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        model_inputs, output_args = super().prepare_model_inputs(micro_batch)
        if _applies(micro_batch) and "prompts" in micro_batch and "responses" in micro_batch:
            prompt_lens, response_lens = response_columns(micro_batch)
            # Row i's k-th response token is predicted at column p_i - 1 + k (rows are right-padded).
            rows = torch.repeat_interleave(torch.arange(len(prompt_lens)), response_lens)
            k = torch.arange(int(response_lens.sum())) - torch.repeat_interleave(
                response_lens.cumsum(0) - response_lens, response_lens
            )
            cols = prompt_lens[rows] - 1 + k
            model_inputs["logits_to_keep"] = 0
            model_inputs[_PICK] = (rows, cols)
            model_inputs[_SHARED] = _shared_prefix(model_inputs["input_ids"], prompt_lens)
            output_args["agl_response_positions"] = (rows, cols)
        return model_inputs, output_args

    def prepare_model_outputs(
        self, output: Any, output_args: dict[str, Any], micro_batch: Any, logits_processor_func: Any
    ) -> dict[str, Any]:
        if "agl_response_positions" not in output_args:
            return super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)
        rows, cols = output_args["agl_response_positions"]
        selected = output.logits[0]  # [K, V]: the response positions only, in (rows, cols) order
        cu_seqlens = micro_batch["input_ids"].offsets()
        flat = cu_seqlens[:-1].cpu()[rows] + cols
        temperature = output_args["temperature"].to(selected.device)[rows.to(selected.device)]
        selected = transformer_impl._scale_logits_by_temperature(
            selected, temperature.unsqueeze(-1), is_unit_temperature=output_args.get("temperature_is_one", False)
        )
        labels = output_args["input_ids_rmpad_rolled"][flat.to(selected.device)]
        total = int(cu_seqlens[-1])
        model_output: dict[str, Any] = {}

        def placed(values: torch.Tensor) -> torch.Tensor:
            full = values.new_zeros(total).index_put((flat.to(values.device),), values)
            return torch.nested.nested_tensor_from_jagged(full, cu_seqlens)

        if not tu.get_non_tensor_data(data=micro_batch, key="distillation_only", default=False):
            model_output["log_probs"] = placed(log_probs_of(selected, labels))
        if tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False):
            model_output["entropy"] = placed(transformer_impl.verl_F.entropy_from_logits(selected))
        return model_output

"""VERL's FSDP language-model engine on CPU, with two changes a real model needs there.

- **Logits only where the loss reads them.** VERL 0.9.1's ``FSDPEngineWithLMHead`` computes full-vocabulary logits
  at every position of every row and takes log-probs over the whole sequence, of which the actor's loss and the old
  log-prob pass read only the response positions (``no_padding_2_padding``). With Gemma 3's 262k-token vocabulary
  that is 262k × ~500 positions × rows: 4 GiB of logits for 8 rows, and most of a CPU step. Here the model computes
  logits on the columns that predict a response token of some row of the micro-batch (``logits_to_keep``, a window
  from the earliest to the last such column) and the log-probs (and entropy) of each row's own response positions
  are placed where VERL's full-length outputs have them, zeros elsewhere. Only the padded path (CPU's
  ``use_remove_padding: false``) without fused kernels, distillation or Σπ² is changed; anything else is VERL's.
- **The shared prompt prefix computed once.** A few-shot template is most of every row's prompt (477 of 505–540
  tokens on word-math). The rows of a micro-batch start together (right-padded), so their common leading tokens run
  through the model once, at batch 1, and the rest of each row runs over that KV cache repeated for every row; the
  gradient of the repeated cache sums into the one prefix pass, as the rows' would, and each token keeps its index
  = its position, so sliding-window layers see what they would (``local/prefix_forward`` does the same for the local
  trainer). Only where no gradient is taken (the old log-prob pass): FSDP2 reshards a layer after a backward through
  it, so the prefix pass's own backward would find its parameters freed.
- **Frozen input embeddings**, which VERL has no option for: ``+actor_rollout_ref.model.override_config.
  agl_freeze_embeddings=true`` (VERL copies ``override_config`` into the HF config, which the engine reads) leaves
  the input embedding (and Gemma's output head tied to it) untrained, as the local trainer's ``--freeze-embeddings``
  does. FSDP2 shards frozen parameters like any other; the optimizer skips them (no grad), so the CPU replica's
  changed-only weight push leaves them behind (383 of 1,663 MiB for Gemma 3 270M).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode
from verl.workers.engine.fsdp import transformer_impl

__all__ = ["FREEZE_EMBEDDINGS", "CpuLMHeadEngine", "log_probs_of", "response_columns"]

# The HF config attribute (set through VERL's model.override_config) that freezes the input embeddings.
FREEZE_EMBEDDINGS = "agl_freeze_embeddings"
# Below this many shared leading tokens a micro-batch runs in one pass: a second pass would not pay for itself.
MIN_SHARED_PREFIX = 16
# The model-input key that carries the shared prefix length from prepare_model_inputs to the module call.
_SHARED = "agl_shared_prefix"


def log_probs_of(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] for every row at once (``logits_labels - logsumexp``, VERL's own formula; in fp32
    at least, where VERL's row loop takes log_softmax for bf16 because logsumexp is unstable there)."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    return torch.gather(logits, -1, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


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


class _PrefixOnce:
    """The engine's module, called as VERL's ``forward_step`` calls it; with ``agl_shared_prefix`` in the inputs, the
    prefix runs once and the rows' rest over its repeated KV cache (the module doc)."""

    def __init__(self, module: torch.nn.Module):
        self.module = module

    def __call__(self, **inputs: Any) -> Any:
        shared = inputs.pop(_SHARED, 0)
        # With grad, FSDP2 frees each layer's unsharded parameters after a backward through it, which the prefix
        # pass's own backward then needs ("setStorage: ... out of bounds for storage of size 0" in a VERL run): the
        # update takes one pass; the old log-prob pass (no grad) takes two.
        if not shared or torch.is_grad_enabled():
            return self.module(**inputs)
        ids, positions, keep = inputs["input_ids"], inputs["position_ids"], inputs["logits_to_keep"]
        past = self.module(
            input_ids=ids[:1, :shared], position_ids=positions[:1, :shared], use_cache=True, logits_to_keep=1
        ).past_key_values
        past.batch_repeat_interleave(ids.shape[0])
        return self.module(
            input_ids=ids[:, shared:],
            attention_mask=inputs["attention_mask"],
            position_ids=positions[:, shared:],
            past_key_values=past,
            use_cache=True,
            logits_to_keep=keep - shared,
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

    def forward_step(self, micro_batch: Any, loss_function: Any, forward_only: bool) -> Any:
        module: torch.nn.Module = self.module  # type: ignore[has-type]  # set by VERL's untyped engine
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
            # Row i's response tokens are predicted at columns p_i - 1 ... p_i + r_i - 2 (rows are right-padded).
            first = int((prompt_lens - 1).min())
            last = int((prompt_lens + response_lens - 2).max())
            model_inputs["logits_to_keep"] = torch.arange(first, last + 1, device=model_inputs["input_ids"].device)
            model_inputs[_SHARED] = _shared_prefix(model_inputs["input_ids"], prompt_lens)
            output_args["agl_response_window"] = (first, prompt_lens, response_lens)
        return model_inputs, output_args

    def prepare_model_outputs(
        self, output: Any, output_args: dict[str, Any], micro_batch: Any, logits_processor_func: Any
    ) -> dict[str, Any]:
        if "agl_response_window" not in output_args:
            return super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)
        first, prompt_lens, response_lens = output_args["agl_response_window"]
        logits = output.logits  # [B, W, V]: the window's columns only
        cu_seqlens = micro_batch["input_ids"].offsets()
        rows = torch.repeat_interleave(torch.arange(len(prompt_lens)), response_lens)
        # Within each row, the k-th response token is predicted at column p_i - 1 + k.
        k = torch.arange(int(response_lens.sum())) - torch.repeat_interleave(
            response_lens.cumsum(0) - response_lens, response_lens
        )
        cols = prompt_lens[rows] - 1 + k
        flat = cu_seqlens[:-1].cpu()[rows] + cols
        selected = logits[rows.to(logits.device), (cols - first).to(logits.device)]  # [K, V]
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

"""A step's ``DataProto`` in VERL 0.9's TransferQueue, as its V1 trainer's phases read it.

VERL 0.9's V1 trainer moves no batch between its phases: its agent loop writes each finished sample to TransferQueue
(``verl/trainer/ppo/v1/agent_loop_tq.py``: one key per trajectory, unpadded 1-D ``prompts``, ``responses``,
``response_mask``, ``input_ids``, ``position_ids``, ... and tags with the lengths), and ``_compute_old_log_prob``,
``_update_actor`` etc. take a ``KVBatchMeta`` (keys and tags) whose workers fetch the fields they need. agl's rows
come from the store, not from that agent loop, so ``TransferQueueBatches.put`` writes them in the same layout, with
the rollout-level ``advantages`` the loop computed.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from tensordict import NonTensorStack, TensorDict
from verl import DataProto

__all__ = ["PARTITION", "StepBatches", "TransferQueueBatches", "to_samples"]

# VERL's V1 trainer trains from this partition (``ReplayBuffer.sample(partition_id="train")``).
PARTITION = "train"


class StepBatches(Protocol):
    """Where a step's rows live while VERL's phases run on them."""

    def put(self, data: DataProto, step: int) -> Any:
        """Writes ``data``'s rows; returns the ``KVBatchMeta`` naming them."""
        ...

    def read(self, meta: Any, fields: list[str]) -> DataProto:
        """``fields`` of ``meta``'s rows (in its order), right-padded."""
        ...

    def write(self, meta: Any, fields: dict[str, torch.Tensor]) -> Any:
        """Writes right-padded per-response ``fields`` back (as VERL stores them); returns the updated meta."""
        ...

    def refresh(self, meta: Any) -> Any:
        """``meta`` naming every field its rows hold now (what a worker fetches), its extra info kept."""
        ...

    def clear(self, meta: Any) -> None: ...


def _nested(rows: list[torch.Tensor]) -> torch.Tensor:
    # Always jagged, also when every row has the same length (VERL's workers read offsets()).
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def to_samples(data: DataProto, step: int) -> tuple[list[str], TensorDict, list[dict[str, Any]]]:
    """Keys, fields and tags of ``data``'s rows in the layout VERL's V1 agent loop writes: the left-padded prompts
    and right-padded responses cut to their tokens, ``input_ids`` their concatenation."""
    b = data.batch
    prompt_width = b["prompts"].shape[1]
    response_valid = b["attention_mask"][:, prompt_width:].bool()
    prompt_valid = b["attention_mask"][:, :prompt_width].bool()
    columns: dict[str, list[torch.Tensor]] = {k: [] for k in ("prompts", "responses", "input_ids", "position_ids")}
    per_response = [
        k
        for k in ("response_mask", "advantages", "returns", "rollout_log_probs", "old_log_probs", "token_level_scores")
        if k in b
    ]
    columns.update({k: [] for k in per_response})
    tags: list[dict[str, Any]] = []
    for i in range(len(data)):
        prompt = b["prompts"][i][prompt_valid[i]]
        length = int(response_valid[i].sum())
        response = b["responses"][i][:length]
        input_ids = torch.cat([prompt, response])
        columns["prompts"].append(prompt)
        columns["responses"].append(response)
        columns["input_ids"].append(input_ids)
        columns["position_ids"].append(torch.arange(input_ids.numel(), dtype=torch.int64))
        for k in per_response:
            columns[k].append(b[k][i][:length])
        tags.append(
            {
                "status": "success",
                "prompt_len": prompt.numel(),
                "response_len": length,
                "seq_len": input_ids.numel(),
                "global_steps": step,
            }
        )
    fields: dict[str, Any] = {k: _nested(v) for k, v in columns.items()}
    fields["loss_mask"] = fields["response_mask"]
    if "token_level_scores" in fields:
        fields["rm_scores"] = fields.pop("token_level_scores")
    if "uid" in data.non_tensor_batch:
        fields["uid"] = NonTensorStack(*[str(u) for u in data.non_tensor_batch["uid"]])
    keys = [f"agl_{step}_{i}" for i in range(len(data))]
    return keys, TensorDict(fields, batch_size=[len(data)]), tags


class TransferQueueBatches:
    """``StepBatches`` over TransferQueue's key-value calls (``kv``: the ``transfer_queue`` module, started by
    ``AglTaskRunner``, unless another object with its ``kv_batch_put`` / ``kv_batch_get`` / ``kv_clear``)."""

    def __init__(self, kv: Any = None) -> None:
        self._kv = kv

    @property
    def kv(self) -> Any:
        if self._kv is None:
            import transfer_queue

            self._kv = transfer_queue
        return self._kv

    def put(self, data: DataProto, step: int) -> Any:
        keys, fields, tags = to_samples(data, step)
        return self.kv.kv_batch_put(keys=keys, partition_id=PARTITION, fields=fields, tags=tags)

    def read(self, meta: Any, fields: list[str]) -> DataProto:
        data = self.kv.kv_batch_get(keys=meta.keys, partition_id=meta.partition_id, select_fields=fields)
        return DataProto(batch=data.to_padded_tensor())

    def write(self, meta: Any, fields: dict[str, torch.Tensor]) -> Any:
        from verl.workers.utils.padding import response_to_nested

        mask = self.kv.kv_batch_get(keys=meta.keys, partition_id=meta.partition_id, select_fields=["response_mask"])
        nested = {k: response_to_nested(v, mask["response_mask"]) for k, v in fields.items()}
        return self.kv.kv_batch_put(
            keys=meta.keys, partition_id=meta.partition_id, fields=TensorDict(nested, batch_size=[len(meta.keys)])
        )

    def refresh(self, meta: Any) -> Any:
        # A put of the tags alone returns the meta with every persisted field (TransferQueue's kv_batch_put).
        fresh = self.kv.kv_batch_put(keys=meta.keys, partition_id=meta.partition_id, tags=meta.tags)
        fresh.extra_info = dict(meta.extra_info or {})
        return fresh

    def clear(self, meta: Any) -> None:
        self.kv.kv_clear(keys=meta.keys, partition_id=meta.partition_id)

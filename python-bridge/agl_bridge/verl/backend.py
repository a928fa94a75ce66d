"""``VerlBackend``: the training loop's backend over a VERL ``RayPPOTrainer`` (its worker groups and replicas)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from verl import DataProto
from verl.utils.metric import reduce_metrics

from agl_bridge.advantage import shape_batch
from agl_bridge.convert import llm_resource
from agl_bridge.gen.agl.v1 import types_pb2

__all__ = ["VerlBackend"]


class VerlBackend:
    """Publishes the rollout replicas' OpenAI endpoints; updates the actor with VERL's workers:

    keep whole mini-batches (``ppo_mini_batch_size × rollout.n`` rows, at most ``max_ppo_update_times`` of them,
    dropping rows of zero-advantage groups first) → replicas asleep → balance → old (and reference) log-probs →
    actor update → weights pushed to the replicas (``checkpoint_manager.update_weights``)."""

    def __init__(
        self,
        trainer: Any,
        *,
        llm_name: str = "main_llm",
        proxy_url: str | None = None,
        max_ppo_update_times: int | None = None,
    ) -> None:
        self.trainer = trainer
        self.llm_name, self.proxy_url = llm_name, proxy_url
        self.max_ppo_update_times = max_ppo_update_times
        self.last_metrics: dict[str, float] = {}

    @property
    def pad_token_id(self) -> int:
        return int(self.trainer.tokenizer.pad_token_id)

    @property
    def model_name(self) -> str:
        return str(self.trainer.config.actor_rollout_ref.model.path)

    def addresses(self) -> list[str]:
        t = self.trainer
        manager = getattr(t, "llm_server_manager", None)
        if manager is not None:
            return list(manager.get_addresses())  # verl 0.8
        return list(t.async_rollout_manager.server_addresses)  # verl <= 0.7

    def resources(self) -> dict[str, types_pb2.Resource]:
        rollout = self.trainer.config.actor_rollout_ref.rollout
        sampling = {"temperature": float(rollout.temperature), "max_tokens": int(rollout.response_length)}
        engines = {
            f"policy-{i}": llm_resource(f"http://{address}/v1", self.model_name, sampling_parameters=sampling)
            for i, address in enumerate(self.addresses())
        }
        if not engines:
            raise RuntimeError("VERL started no rollout replica")
        if self.proxy_url:
            return {
                self.llm_name: llm_resource(self.proxy_url, self.model_name, sampling_parameters=sampling, proxy=True),
                **engines,
            }
        first = next(iter(engines.values()))
        return {self.llm_name: first, **engines}

    async def start(self) -> None:
        """Pushes the actor's weights to the replicas and wakes them, as VERL's own ``fit`` does before anything
        else: ``init_workers`` leaves them asleep (and ``load_format: dummy`` starts them with random weights), so
        neither the first step nor a validation before training could be served otherwise."""
        await asyncio.get_running_loop().run_in_executor(None, self.start_sync)

    def start_sync(self) -> None:
        self.trainer.checkpoint_manager.update_weights(self.trainer.global_steps)

    async def before_update(self) -> None:
        return None

    def update_sync(self, data: DataProto) -> dict[str, float]:
        t, cfg = self.trainer, self.trainer.config
        multiple = int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size) * int(cfg.actor_rollout_ref.rollout.n)
        max_rows = multiple * self.max_ppo_update_times if self.max_ppo_update_times else None
        shaped, metrics = shape_batch(data, multiple, max_rows, seed=int(t.global_steps))
        if shaped is None:
            metrics["training/skipped_step"] = 1.0
            return metrics
        batch = shaped
        batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(dim=-1).tolist()
        batch.meta_info["global_steps"] = t.global_steps
        t.checkpoint_manager.sleep_replicas()
        if cfg.trainer.balance_batch:
            t._balance_batch(batch, metrics=metrics)
        old = t._compute_old_log_prob(batch)
        old_log_prob = old[0] if isinstance(old, tuple) else old
        batch = batch.union(old_log_prob)
        if getattr(t, "use_reference_policy", False):
            batch = batch.union(t._compute_ref_log_prob(batch))
        if getattr(t, "use_critic", False):
            batch = batch.union(t._compute_values(batch))
            critic_output = t._update_critic(batch)
            metrics.update(reduce_metrics(critic_output.meta_info["metrics"]))
        if cfg.trainer.critic_warmup <= t.global_steps:
            actor_output = t._update_actor(batch)
            metrics.update(reduce_metrics(actor_output.meta_info["metrics"]))
        t.checkpoint_manager.update_weights(t.global_steps)
        t.global_steps += 1
        self.last_metrics = metrics
        return metrics

    async def update(self, data: DataProto) -> dict[str, float]:
        return await asyncio.get_running_loop().run_in_executor(None, self.update_sync, data)

    def save(self, directory: Path) -> None:
        # VERL checkpoints the actor itself (trainer.save_freq, default_local_dir); the loop keeps step and cursor.
        self.trainer._save_checkpoint()

    def load(self, directory: Path) -> None:
        self.trainer._load_checkpoint()

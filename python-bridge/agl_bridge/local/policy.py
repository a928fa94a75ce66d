"""The local policy: one causal LM that both serves completions and is trained, with every use of the weights on one
thread so generation never sees a half-applied update."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import math
import threading
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig

from agl_bridge.errors import ConfigError
from agl_bridge.local.batching import Generation, SampleRequest, sample_batch
from agl_bridge.local.prefix_forward import response_log_probs
from agl_bridge.training.rollout_correction import apply_rollout_correction

__all__ = ["NO_CHAT_TEMPLATE", "Generation", "GrpoConfig", "Policy"]

NO_CHAT_TEMPLATE = (
    "the model's tokenizer has no chat template (a base model): serve its agents through /v1/completions with a "
    "few-shot prompt, or give a chat template (--chat-template FILE)"
)


@dataclass
class GrpoConfig:
    """The update: VERL's policy loss ``loss_mode`` with PPO clipping, ``ppo_epochs`` passes over the batch in
    mini-batches of ``mini_batch_size`` rows (all rows when ``None``), each in micro-batches of
    ``micro_batch_size`` rows; ``rollout_correction`` (VERL's
    ``algorithm.rollout_correction`` keys, ``agl_bridge.training.rollout_correction``) weights each token's loss by its
    truncated importance ratio between the weights updated and the ones that sampled it."""

    lr: float = 1e-3
    weight_decay: float = 0.0
    optimizer: str = "adamw"
    betas: tuple[float, float] = (0.9, 0.999)
    loss_mode: str = "vanilla"
    loss_agg_mode: str = "token-mean"
    clip_ratio: float = 0.2
    ppo_epochs: int = 1
    mini_batch_size: int | None = None
    # Rows per forward/backward pass (gradients accumulate over a mini-batch's micro-batches): memory, not the update.
    micro_batch_size: int = 8
    grad_clip: float = 1.0
    # Leaves the input embeddings (and an output head tied to them: Gemma's) untrained: most of a small real model's
    # parameters, and what a few RL steps at a high learning rate damage first.
    freeze_embeddings: bool = False
    # Training's sampling temperature: the loss is on the distribution that sampled (logits / temperature), as
    # VERL's actor computes it (``actor_rollout_ref.rollout.temperature``).
    temperature: float = 1.0
    rollout_correction: dict[str, Any] | None = None
    # VERL's KL loss (actor.use_kl_loss with kl_loss_coef, kl_loss_type): ``kl_coef`` × the token-mean KL estimate
    # between the weights trained and the reference ones (those the first update started from), added to the loss.
    kl_coef: float = 0.0
    kl_type: str = "low_var_kl"

    def actor_config(self) -> ActorConfig:
        return ActorConfig(
            strategy="fsdp",
            rollout_n=1,
            ppo_mini_batch_size=1,
            ppo_micro_batch_size_per_gpu=1,
            clip_ratio=self.clip_ratio,
            loss_agg_mode=self.loss_agg_mode,
            ppo_epochs=self.ppo_epochs,
        )


class Policy:
    """A model, its tokenizer and its optimizer. ``run`` executes a function on the model thread; the async methods
    are safe to call from the event loop while the policy server is serving.

    By default the update runs on the model thread too, so generation waits for it. After ``train_on_copy`` the
    update runs on a copy of the model (``train_model``) on a thread of its own while the served model goes on
    generating with the previous weights, and the new weights are swapped into the served model at the end of the
    update, between two generations (a lock, not the model thread's queue, which may hold a whole batch of
    requests): an engine and a trainer, as asynchronous training needs."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        grpo: GrpoConfig | None = None,
        sampling_seed: int | None = None,
        max_batch: int = 32,
    ):
        self.model = model.eval()
        self.train_model = self.model
        self.tokenizer = tokenizer
        self.grpo = grpo or GrpoConfig()
        if self.grpo.freeze_embeddings:
            self.model.get_input_embeddings().weight.requires_grad_(False)
        self.optimizer = self._make_optimizer()
        # The frozen weights the KL loss is measured against (``kl_coef`` > 0): set by the first update, or loaded.
        self.reference: torch.nn.Module | None = None
        self._actor_config = self.grpo.actor_config()
        self._loss_fn = core_algos.get_policy_loss_fn(self.grpo.loss_mode)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agl-policy")
        self._train_thread: ThreadPoolExecutor | None = None
        # Held by each generation and by the swap of trained weights into the served model.
        self._serving = threading.Lock()
        # With a sampling seed, a request without a seed of its own draws from a generator seeded by (sampling seed,
        # weights version, prompt, how many times this prompt was drawn for these weights): runners send a step's
        # requests in an order nobody controls, and this numbering makes the step's samples the same in every run.
        self.sampling_seed = sampling_seed
        self._draws: Counter[tuple[int, ...]] = Counter()
        self.weights_version = 0
        self.max_batch = max_batch
        self.batch_wait_s = 0.005
        self._queue: list[tuple[SampleRequest, asyncio.Future[Generation]]] = []
        self._batcher: asyncio.Task[None] | None = None
        # The size of each batch sampled (the last 1024): how well concurrent requests were batched.
        self.batch_sizes: deque[int] = deque(maxlen=1024)

    @property
    def weights_version(self) -> int:
        """Bumped by every update (and by whoever else swaps the weights in); the policy server reports it so callers
        can tell which weights answered. Setting it starts the draw numbering of the sampling seed afresh."""
        return self._weights_version

    @weights_version.setter
    def weights_version(self, version: int) -> None:
        self._weights_version = version
        self._draws.clear()

    def train_on_copy(self) -> None:
        """Trains a copy of the model from now on (see the class doc); the optimizer starts afresh on the copy."""
        if self._train_thread is not None:
            return
        self.train_model = copy.deepcopy(self.model)
        self.optimizer = self._make_optimizer()
        self._train_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agl-train")

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """Loads ``state`` into the served model and, when training a copy, into the copy."""
        self.model.load_state_dict(state)
        if self.train_model is not self.model:
            self.train_model.load_state_dict(state)

    def _trained_params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.train_model.parameters() if p.requires_grad]

    def _make_optimizer(self) -> torch.optim.Optimizer:
        cfg, params = self.grpo, self._trained_params()
        if cfg.optimizer == "sgd":
            return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        if cfg.optimizer == "adamw":
            return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
        raise ConfigError(f"unknown optimizer {cfg.optimizer!r} (adamw or sgd)")

    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        if self._train_thread is not None:
            self._train_thread.shutdown(wait=True)

    # -- serving -----------------------------------------------------------------------------------------------

    def encode_chat(self, messages: list[dict[str, Any]]) -> list[int]:
        if not self.tokenizer.chat_template:
            raise ValueError(NO_CHAT_TEMPLATE)
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_text(self, text: str) -> list[int]:
        """A text prompt's ids with the special tokens the model's tokenizer adds (Gemma: ``<bos>`` first), less a
        closing EOS: the answer comes after the prompt."""
        ids = list(self.tokenizer(text)["input_ids"])
        eos = self.tokenizer.eos_token
        if ids and ids[-1] == self.tokenizer.eos_token_id and not (eos and text.endswith(eos)):
            ids.pop()
        return ids

    def generate_sync(self, prompt_ids: list[int], max_tokens: int, **kwargs: Any) -> Generation:
        """Samples up to ``max_tokens`` ids after ``prompt_ids`` (``SampleRequest``'s keywords), alone."""
        return self.generate_batch_sync([SampleRequest(list(prompt_ids), max_tokens, **kwargs)])[0]

    def generate_batch_sync(self, requests: list[SampleRequest]) -> list[Generation]:
        """Samples every request in one batch (``sample_batch``), with the served weights unchanged throughout."""
        with self._serving:
            for r in requests:
                if r.seed is None and self.sampling_seed is not None:
                    r.seed = self._draw_seed(r.prompt_ids)
            self.batch_sizes.append(len(requests))
            return sample_batch(self.model, self.tokenizer, requests, int(self.tokenizer.pad_token_id or 0))

    def _draw_seed(self, prompt_ids: list[int]) -> int:
        key = tuple(prompt_ids)
        draw = self._draws[key]
        self._draws[key] += 1
        text = f"{self.sampling_seed}/{self.weights_version}/{draw}/{','.join(map(str, key))}"
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1

    async def generate(self, prompt_ids: list[int], max_tokens: int, **kwargs: Any) -> Generation:
        """Queues one request; the requests queued while a batch runs make up the next batch (up to
        ``max_batch``), sampled together on the model thread."""
        request = SampleRequest(list(prompt_ids), max_tokens, **kwargs)
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._serve_queue())
        return await future

    async def _serve_queue(self) -> None:
        while self._queue:
            # Requests sent at once (a runner pool's) arrive over a few milliseconds: let them gather.
            await asyncio.sleep(self.batch_wait_s)
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            try:
                outs = await self.run(self.generate_batch_sync, [r for r, _ in batch])
            except Exception as error:  # noqa: BLE001 - handed to every caller of the batch
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), out in zip(batch, outs, strict=True):
                if not future.done():
                    future.set_result(out)

    async def drain(self) -> None:
        """Returns once every request queued so far has been answered."""
        while self._batcher is not None and not self._batcher.done():
            await asyncio.shield(self._batcher)
        await self.run(lambda: None)

    # -- training ----------------------------------------------------------------------------------------------

    def set_reference(self, state: dict[str, torch.Tensor] | None = None) -> None:
        """The KL loss's reference: a frozen copy of the weights trained now, or of ``state``."""
        reference = copy.deepcopy(self.train_model).eval().requires_grad_(False)
        if state is not None:
            reference.load_state_dict(state)
        self.reference = reference

    def response_log_probs(self, data: DataProto, model: torch.nn.Module | None = None) -> torch.Tensor:
        """Log-probs [B, R] of ``responses`` under the weights being trained (or ``model``: the KL loss's reference) at
        training's sampling temperature (with grad when enabled), the prompts' shared prefix computed once
        (``prefix_forward``)."""
        return response_log_probs(model or self.train_model, data.batch, self.grpo.temperature)

    @staticmethod
    def _rollout_diff(data: DataProto, old: torch.Tensor, metrics: dict[str, float]) -> None:
        """The largest gap between the engine's sampled log-probs and the trainer's, kept in ``metrics``."""
        if "rollout_log_probs" in data.batch.keys():
            diff = float(((old - data.batch["rollout_log_probs"]).abs() * data.batch["response_mask"]).max())
            key = "actor/rollout_logprob_abs_diff_max"
            metrics[key] = max(diff, metrics.get(key, 0.0))

    def _micro_batches(self, data: DataProto) -> list[DataProto]:
        size = max(1, self.grpo.micro_batch_size)
        return [data.select_idxs(list(range(s, min(s + size, len(data))))) for s in range(0, len(data), size)]

    def update_sync(self, data: DataProto) -> dict[str, float]:
        """One GRPO/PPO update on a batch that has ``advantages``: old log-probs from the current weights, then
        ``ppo_epochs`` passes of VERL's policy loss; the served model has the new weights afterwards. Returns
        metrics."""
        metrics = self._train_sync(data)
        self._swap_sync()
        return metrics

    def _swap_sync(self) -> None:
        """The served model takes the trained weights (nothing to copy unless training a copy); a new version."""
        with self._serving:
            if self.train_model is not self.model:
                self.model.load_state_dict(self.train_model.state_dict())
            self.weights_version += 1

    def _train_sync(self, data: DataProto) -> dict[str, float]:
        cfg = self.grpo
        n = len(data)
        size = cfg.mini_batch_size or n
        # One pass over one mini-batch with no correction: the old log-probs are the update's own (ratio 1), taken
        # from its forward pass rather than from a pass of their own.
        on_policy = cfg.ppo_epochs == 1 and size >= n and not cfg.rollout_correction
        metrics: dict[str, float] = {}
        if not on_policy:
            with torch.no_grad():
                old = torch.cat([self.response_log_probs(mb) for mb in self._micro_batches(data)])
            data.batch["old_log_probs"] = old
            self._rollout_diff(data, old, metrics)
        data, correction_metrics = apply_rollout_correction(data, cfg.rollout_correction)
        metrics.update(correction_metrics)
        weighted = "rollout_is_weights" in data.batch.keys()
        if cfg.kl_coef > 0 and self.reference is None:
            self.set_reference()
        self.train_model.train()
        losses, kls, clipfracs, norms, kl_losses = [], [], [], [], []
        try:
            for epoch in range(cfg.ppo_epochs):
                order = torch.randperm(n, generator=torch.Generator().manual_seed(self.weights_version * 131 + epoch))
                for start in range(0, n, size):
                    idx = order[start : start + size].numpy()
                    mini = data.select_idxs(idx)
                    tokens = float(mini.batch["response_mask"].sum().clamp(min=1))
                    self.optimizer.zero_grad(set_to_none=True)
                    pg_loss, pg_metrics = torch.zeros(()), {}
                    for mb in self._micro_batches(mini):
                        log_prob = self.response_log_probs(mb)
                        if on_policy:
                            mb.batch["old_log_probs"] = log_prob.detach()
                            self._rollout_diff(mb, log_prob.detach(), metrics)
                        loss, pg_metrics = self._loss_fn(
                            old_log_prob=mb.batch["old_log_probs"],
                            log_prob=log_prob,
                            advantages=mb.batch["advantages"],
                            response_mask=mb.batch["response_mask"],
                            loss_agg_mode=cfg.loss_agg_mode,
                            config=self._actor_config,
                            rollout_is_weights=mb.batch["rollout_is_weights"] if weighted else None,
                        )
                        if cfg.kl_coef > 0:
                            kl_loss = self._kl_loss(mb, log_prob)
                            loss = loss + cfg.kl_coef * kl_loss
                            kl_losses.append(float(kl_loss.detach()))
                        # The mini-batch's loss is its micro-batches' weighted by their share of its tokens (token
                        # means) or of its rows (the other modes).
                        if cfg.loss_agg_mode == "token-mean":
                            share = float(mb.batch["response_mask"].sum()) / tokens
                        else:
                            share = len(mb) / len(mini)
                        (loss * share).backward()
                        pg_loss = pg_loss + loss.detach() * share
                    norm = torch.nn.utils.clip_grad_norm_(self._trained_params(), cfg.grad_clip)
                    if math.isfinite(float(norm)):
                        self.optimizer.step()
                    losses.append(float(pg_loss.detach()))
                    kls.append(float(pg_metrics.get("actor/ppo_kl", 0.0)))
                    clipfracs.append(float(pg_metrics.get("actor/pg_clipfrac", 0.0)))
                    norms.append(float(norm))
        finally:
            self.train_model.eval()
        metrics.update(
            {
                "actor/pg_loss": sum(losses) / len(losses),
                "actor/ppo_kl": sum(kls) / len(kls),
                "actor/pg_clipfrac": sum(clipfracs) / len(clipfracs),
                "actor/grad_norm": sum(norms) / len(norms),
                "actor/n_updates": float(len(losses)),
            }
        )
        if kl_losses:
            metrics["actor/kl_loss"] = sum(kl_losses) / len(kl_losses)
        return metrics

    def _kl_loss(self, mb: DataProto, log_prob: torch.Tensor) -> torch.Tensor:
        """VERL's KL loss of a micro-batch: ``kl_penalty`` (``kl_type``) against the reference, token-mean."""
        assert self.reference is not None
        with torch.no_grad():
            ref = self.response_log_probs(mb, self.reference)
        kld = core_algos.kl_penalty(logprob=log_prob, ref_logprob=ref, kl_penalty=self.grpo.kl_type)
        return core_algos.agg_loss(
            loss_mat=kld, loss_mask=mb.batch["response_mask"], loss_agg_mode=self.grpo.loss_agg_mode
        )

    async def update(self, data: DataProto) -> dict[str, float]:
        if self._train_thread is None:
            return await self.run(self.update_sync, data)
        return await asyncio.get_running_loop().run_in_executor(self._train_thread, self.update_sync, data)

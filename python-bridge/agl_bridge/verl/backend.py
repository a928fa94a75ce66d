"""``VerlBackend``: the training loop's backend over a VERL ``RayPPOTrainer`` (its worker groups and replicas)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from omegaconf import open_dict, read_write
from verl import DataProto
from verl.utils.profiler import simple_timer

from agl_bridge.errors import ConfigError, ProxyAdminError
from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.log import get_logger
from agl_bridge.retry import retry
from agl_bridge.store.convert import llm_resource
from agl_bridge.store.network import warn_if_unreachable
from agl_bridge.store.proxy_admin import ProxyAdmin
from agl_bridge.training.advantage import shape_batch
from agl_bridge.training.rollout_correction import apply_rollout_correction
from agl_bridge.verl.cpu import is_cpu
from agl_bridge.verl.settings import bypass_mode
from agl_bridge.verl.tq_batch import StepBatches

__all__ = ["VerlBackend"]

# What ``save`` writes next to the loop's state: the VERL checkpoint folder it corresponds to.
VERL_CHECKPOINT_FILE = "verl.json"
# The first wait before trying to resume the LLM proxy again (doubled after each failure).
RESUME_RETRY_DELAY_S = 0.5

log = get_logger("verl")


def mini_batch_rows(data: DataProto, mini_batch_tasks: int, n: int) -> int:
    """Rows of a mini-batch: VERL's mini-batch is ``ppo_mini_batch_size`` prompts × ``rollout.n`` rollouts (in VERL's
    own multi-turn loop a rollout is one row, all turns in it), and an agent's rollout here is a row per LLM call; so
    a mini-batch is that many rollouts' rows at this step's rows per rollout, a multiple of ``n`` (VERL's
    ``_update_actor`` multiplies by it). One row a rollout: ``ppo_mini_batch_size × n`` rows, as in VERL."""
    rollouts = len(set(data.non_tensor_batch["rollout_id_list"].tolist())) if len(data) else 0
    if rollouts == 0:
        return mini_batch_tasks * n
    return max(n, (mini_batch_tasks * n * len(data) // rollouts) // n * n)


@contextmanager
def _actor_mini_batch_rows(cfg: Any, rows: int) -> Iterator[None]:
    """VERL's ``_update_actor`` reads its mini-batch (``ppo_mini_batch_size × rollout.n`` rows) from the config: set it
    to ``rows`` for the call, then back."""
    actor = cfg.actor_rollout_ref.actor
    before = actor.ppo_mini_batch_size
    with read_write(actor):
        actor.ppo_mini_batch_size = rows // int(cfg.actor_rollout_ref.rollout.n)
    try:
        yield
    finally:
        with read_write(actor):
            actor.ppo_mini_batch_size = before


class VerlBackend:
    """Publishes the rollout replicas' OpenAI endpoints; updates the actor with VERL's workers:

    keep whole mini-batches (the rows of ``ppo_mini_batch_size × rollout.n`` rollouts, at most
    ``max_ppo_update_times`` of them, dropping rows of zero-advantage groups first) → into TransferQueue → replicas
    asleep → balance → old (and reference) log-probs → actor update (VERL's V1 trainer phases) → weights pushed to
    the replicas (``checkpoint_manager.update_weights``).

    With an LLM proxy (``proxy_url``), the swap happens with the proxy paused and drained: ``before_update`` pauses
    it (calls wait) and waits until no call is in flight (at most ``drain_timeout`` seconds), ``update`` resumes it
    once the new weights are pushed — also when the update fails or is cancelled — and ``after_update`` resumes it if
    ``update`` never ran (a skipped step). Calls the runners make meanwhile reach the engines only once they are
    awake again with the new weights."""

    def __init__(
        self,
        trainer: Any,
        *,
        llm_name: str = "main_llm",
        proxy_url: str | None = None,
        max_ppo_update_times: int | None = None,
        proxy_token: str | None = None,
        drain_timeout: float = 60.0,
        rollout_correction: dict[str, Any] | None = None,
        store_address: str | None = None,
    ) -> None:
        self.trainer = trainer
        # Where the published URLs go: loopback ones are warned about (once) when the store is on another host.
        self.store_address = store_address
        self._warned: set[str] = set()
        self.llm_name, self.proxy_url = llm_name, proxy_url
        self.max_ppo_update_times = max_ppo_update_times
        self.last_metrics: dict[str, float] = {}
        self.proxy = ProxyAdmin(proxy_url, proxy_token) if proxy_url else None
        self.drain_timeout = drain_timeout
        # VERL's rollout correction, decoupled mode (agl_bridge.training.rollout_correction); None: none.
        self.rollout_correction = rollout_correction
        self._paused = False
        self._pause_metrics: dict[str, float] = {}

    def _check_reachable(self, urls: list[str], flag: str) -> None:
        for url in urls:
            if self.store_address and url not in self._warned:
                if warn_if_unreachable(url, self.store_address, flag) is not None:
                    self._warned.add(url)

    @property
    def batches(self) -> StepBatches:
        """Where a step's rows live while VERL's phases run (``AglRayPPOTrainer.step_batches``: TransferQueue)."""
        return self.trainer.step_batches

    @property
    def pad_token_id(self) -> int:
        return int(self.trainer.tokenizer.pad_token_id)

    @property
    def model_name(self) -> str:
        return str(self.trainer.config.actor_rollout_ref.model.path)

    def addresses(self) -> list[str]:
        return list(self.trainer.llm_server_manager.get_addresses())

    def resources(self) -> dict[str, types_pb2.Resource]:
        rollout = self.trainer.config.actor_rollout_ref.rollout
        sampling = {"temperature": float(rollout.temperature), "max_tokens": int(rollout.response_length)}
        # CPU replicas serve TLS when $AGL_ENGINE_TLS_CERT is set (agl_bridge.verl.cpu_rollout).
        scheme = "https" if os.environ.get("AGL_ENGINE_TLS_CERT") else "http"
        urls = [f"{scheme}://{address}/v1" for address in self.addresses()]
        engines = {
            f"policy-{i}": llm_resource(url, self.model_name, sampling_parameters=sampling)
            for i, url in enumerate(urls)
        }
        if not engines:
            raise RuntimeError("VERL started no rollout replica")
        self._check_reachable(urls, "AGL_ENGINE_ADVERTISE_HOST (CPU replicas) or VERL's node address")
        if self.proxy_url:
            self._check_reachable([self.proxy_url], "agl.proxy")
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
        await asyncio.to_thread(self.trainer.checkpoint_manager.update_weights, self.trainer.global_steps)

    async def before_update(self) -> None:
        """Pauses the LLM proxy and drains it, so that no call reaches a replica between ``sleep_replicas`` and the
        weight push (an asleep vLLM has neither weights nor KV cache; a call there fails, or is served by weights
        half-way through an update).

        Mode ``wait``, not ``reject``: synchronously, the step's own rollouts are over by now and the next step's are
        enqueued only after the new version is published, so what still calls are stragglers (rollouts the loop
        cancelled at ``rollout_timeout`` whose agents run on) and anything else using the proxy (a person trying the
        model); asynchronously (``max_staleness`` > 0), the next steps' rollouts: their calls in flight finish on the
        old weights (the drain), the next ones wait. Held, they go on against the new weights once resumed, with no
        error for the agent to handle and no retry spent (a rollout spanning the swap has calls of both versions,
        each stamped by the proxy); rejected, each would get a 429 and come back on its own schedule. A swap longer
        than the proxy's longest wait (``pauseMaxWaitMs``, 300 s) turns into 429 + ``Retry-After`` anyway, which
        OpenAI clients retry.

        The drain is bounded (``drain_timeout``): a call that never ends must not stall training. On timeout the
        update goes ahead and the calls still in flight may fail against the sleeping replicas (the runner's
        retries, or the attempt's, take them)."""
        if self.proxy is None:
            return None
        timing: dict[str, float] = {}
        with simple_timer("proxy_pause_drain", timing):
            state, drained = await self._pause_and_drain()
        self._pause_metrics = {
            "proxy/in_flight_at_pause": float(int(state.get("inFlight", 0))),
            "proxy/drained": 1.0 if drained else 0.0,
            "timing_s/proxy_pause_drain": timing["proxy_pause_drain"],
        }
        if not drained:
            log.warning(
                "the LLM proxy at %s still had calls in flight after %.0f s (agl.drain_timeout): updating anyway; "
                "those calls may fail against the sleeping replicas",
                self.proxy.base,
                self.drain_timeout,
            )

    async def _pause_and_drain(self) -> tuple[dict[str, Any], bool]:
        """Pauses the proxy (mode ``wait``) and drains it; the status at the pause, and whether it drained."""
        assert self.proxy is not None
        state = await self.proxy.pause("wait")
        self._paused = True
        try:
            drained = bool((await self.proxy.drain(self.drain_timeout)).get("drained", False))
        except BaseException:
            await self._resume_quietly()
            raise
        return state, drained

    async def after_update(self) -> None:
        """Resumes the proxy if ``update`` did not (the loop calls this after every step, trained or skipped)."""
        await self._resume()

    async def _resume(self) -> None:
        if self.proxy is None or not self._paused:
            return
        # A proxy left paused stalls every rollout to come: a few tries before giving up loudly.
        try:
            await retry(
                self.proxy.resume,
                retryable=lambda error: isinstance(error, ProxyAdminError),
                base_delay=RESUME_RETRY_DELAY_S,
                on_retry=lambda error, _: log.warning("resuming the LLM proxy failed (%s); retrying", error),
            )
        except ProxyAdminError as error:
            raise ProxyAdminError(f"could not resume the LLM proxy after the weight update: {error}") from None
        self._paused = False

    async def _resume_quietly(self) -> None:
        """``_resume`` while another error is on its way out: that one is what the caller sees."""
        try:
            await self._resume()
        except Exception as error:  # noqa: BLE001 - reported, not raised over the original error
            log.error("%s", error)

    def update_sync(self, data: DataProto) -> dict[str, float]:
        """One update through VERL's V1 trainer phases: the kept rows into TransferQueue (``tq_batch``), replicas
        asleep, ``_balance_batch``, ``_compute_old_log_prob`` (skipped in VERL's bypass mode: the engine's log-probs
        go in with the rows as the old ones; and for an on-policy update on CPU, ``_on_policy``), the rollout
        correction, reference log-probs, critic, ``_update_actor``, weights pushed; the rows cleared again whatever
        happens."""
        t, cfg = self.trainer, self.trainer.config
        multiple = mini_batch_rows(
            data, int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size), int(cfg.actor_rollout_ref.rollout.n)
        )
        max_rows = multiple * self.max_ppo_update_times if self.max_ppo_update_times else None
        shaped, metrics = shape_batch(data, multiple, max_rows, seed=int(t.global_steps))
        metrics["training/mini_batch_rows"] = float(multiple)
        if shaped is None:
            metrics["training/skipped_step"] = 1.0
            return metrics
        has_rollout_log_probs = "rollout_log_probs" in shaped.batch.keys()
        bypass = bypass_mode(cfg)
        if bypass and not has_rollout_log_probs:
            raise ConfigError(
                "algorithm.rollout_correction.bypass_mode=true takes the engine's log-probs as the old log-probs, and "
                "this step's rollouts have none: have the engine return logprobs, or set bypass_mode=false"
            )
        timing: dict[str, float] = {}  # VERL's timing_raw: seconds per phase, logged as timing_s/<phase>
        if bypass:
            # VERL's bypass mode, written with the rows: 0.9.1's own (_compute_old_log_prob) puts old_log_probs into
            # TransferQueue but returns the KVBatchMeta from before, so _update_actor never fetches them (KeyError).
            shaped.batch["old_log_probs"] = shaped.batch["rollout_log_probs"].clone()
        batch = self.batches.put(shaped, int(t.global_steps))
        try:
            with simple_timer("sleep_replicas", timing):
                t.checkpoint_manager.sleep_replicas()
            # VERL's V1 step always balances (and pads the batch to a multiple of the data-parallel size).
            batch = t._balance_batch(batch, metrics=metrics)
            if self._on_policy(len(batch), multiple):
                # One pass over one mini-batch: agl's CPU engine takes the update's own log-probs as the old ones.
                metrics["training/old_log_prob_pass_skipped"] = 1.0
            elif not bypass:
                with simple_timer("old_log_prob", timing):
                    batch = t._compute_old_log_prob(batch, metrics=metrics)
                batch = self._correct(batch, has_rollout_log_probs, metrics)
            # verl 0.9.1's _compute_ref_log_prob and _compute_values put their field into TransferQueue but return
            # the meta from before, which names only the fields a worker then fetches (KeyError: 'ref_log_prob' in
            # _update_actor); in VERL's own step the put of _compute_advantage, which agl's rows do not need,
            # refreshes it.
            if getattr(t, "use_reference_policy", False):
                with simple_timer("ref_log_prob", timing):
                    batch = self.batches.refresh(t._compute_ref_log_prob(batch, metrics=metrics))
            if getattr(t, "use_critic", False):
                with simple_timer("values", timing):
                    batch = self.batches.refresh(t._compute_values(batch, metrics=metrics))
                with simple_timer("update_critic", timing):
                    batch = t._update_critic(batch, metrics=metrics)
            if cfg.trainer.critic_warmup <= t.global_steps:
                with simple_timer("update_actor", timing), _actor_mini_batch_rows(cfg, multiple):
                    batch = t._update_actor(batch, metrics=metrics)
            with simple_timer("update_weights", timing):
                t.checkpoint_manager.update_weights(t.global_steps)
        finally:
            self.batches.clear(batch)
        t.global_steps += 1
        metrics.update({f"timing_s/{name}": seconds for name, seconds in timing.items()})
        self.last_metrics = metrics
        return metrics

    def _on_policy(self, rows: int, mini_batch_rows: int) -> bool:
        """Whether the update is one pass over one mini-batch with nothing to weigh against the weights that sampled
        (no rollout correction, not VERL's bypass mode), on agl's CPU engine (``cpu_engine``: it fills in the old
        log-probs the rows then come without; VERL's own engines need them sent)."""
        cfg = self.trainer.config
        return (
            is_cpu(cfg)
            and rows <= mini_batch_rows
            and int(cfg.actor_rollout_ref.actor.ppo_epochs) == 1
            and self.rollout_correction is None
            and not bypass_mode(cfg)
        )

    def _correct(self, batch: Any, has_rollout_log_probs: bool, metrics: dict[str, float]) -> Any:
        """How far the engine's sampling log-probs are from the actor's (~0 unless weights or tokens disagree), and,
        as VERL's V1 ``_compute_advantage`` does in its decoupled mode, the importance weights (and rejection)
        between the actor and the weights that sampled each token, written back for ``_update_actor``."""
        if not has_rollout_log_probs:
            return batch
        rows = self.batches.read(batch, ["old_log_probs", "rollout_log_probs", "response_mask"])
        mask = rows.batch["response_mask"].bool()
        diff = (rows.batch["old_log_probs"] - rows.batch["rollout_log_probs"]).abs()[mask]
        metrics["training/rollout_actor_logprob_abs_diff_mean"] = float(diff.mean()) if diff.numel() else 0.0
        metrics["training/rollout_actor_logprob_abs_diff_max"] = float(diff.max()) if diff.numel() else 0.0
        if self.rollout_correction is None:
            return batch
        corrected, correction_metrics = apply_rollout_correction(rows, self.rollout_correction)
        metrics.update(correction_metrics)
        written = {k: corrected.batch[k] for k in ("rollout_is_weights",) if k in corrected.batch.keys()}
        if not torch.equal(corrected.batch["response_mask"], rows.batch["response_mask"]):
            written["response_mask"] = corrected.batch["response_mask"]  # rejection (rollout_rs) masks tokens out
        return self.batches.write(batch, written) if written else batch

    async def update(self, data: DataProto) -> dict[str, float]:
        """``update_sync`` on a worker thread; the proxy is resumed once it has pushed the weights, or failed."""
        future = asyncio.get_running_loop().run_in_executor(None, self.update_sync, data)
        try:
            metrics = await asyncio.shield(future)
        except asyncio.CancelledError:
            # The thread cannot be stopped: resuming now would send the held calls to replicas that may still be
            # asleep, so wait for it (a second interrupt cuts this short), then resume.
            await asyncio.wait([future])
            await self._resume_quietly()
            raise
        except BaseException:
            await self._resume_quietly()
            raise
        await self._resume()
        metrics.update(self._pause_metrics)
        self._pause_metrics = {}
        return metrics

    def save(self, directory: Path) -> None:
        """VERL's own checkpoint (actor, optimizer, critic, dataloader: ``default_local_dir/global_step_N``), and in
        ``directory`` — the loop's checkpoint, next to its step and triplet cursor — which folder that is.

        The loop calls this only on the steps VERL's ``trainer.save_freq`` saves on (``LoopConfig.save_freq``), so
        each loop checkpoint is paired with exactly one VERL checkpoint holding the weights after those steps, and
        ``load`` loads that one — not VERL's latest, which a kill between the two writes would make newer than the
        loop's step (its extra steps would then be trained twice). Steps after the last save are lost on a kill and
        trained again with fresh rollouts (the loop drops their ``history.jsonl`` lines on resume)."""
        t = self.trainer
        t._save_checkpoint()
        step = int(t.global_steps)
        folder = os.path.abspath(os.path.join(str(t.config.trainer.default_local_dir), f"global_step_{step}"))
        (directory / VERL_CHECKPOINT_FILE).write_text(json.dumps({"global_step": step, "folder": folder}))

    def load(self, directory: Path) -> None:
        """Loads the VERL checkpoint ``save`` paired with the loop checkpoint in ``directory`` (VERL's
        ``resume_mode: resume_path`` on that folder); a loop checkpoint without that record (older ones) loads VERL's
        latest."""
        t = self.trainer
        record = directory / VERL_CHECKPOINT_FILE
        if not record.exists():
            t._load_checkpoint()
            return
        folder = str(json.loads(record.read_text())["folder"])
        if not os.path.isdir(os.path.join(folder, "actor")):
            raise FileNotFoundError(
                f"the agl checkpoint {directory} was saved with VERL's {folder}, whose actor/ is gone "
                "(trainer.max_actor_ckpt_to_keep 1 deletes it as soon as the next one is saved, before the agl "
                "checkpoint moves on): restore it, or start over in a fresh trainer.default_local_dir"
            )
        trainer_cfg = t.config.trainer
        before = (trainer_cfg.get("resume_mode"), trainer_cfg.get("resume_from_path"))
        with read_write(trainer_cfg), open_dict(trainer_cfg):
            trainer_cfg.resume_mode, trainer_cfg.resume_from_path = "resume_path", folder
        try:
            t._load_checkpoint()
        finally:
            with read_write(trainer_cfg), open_dict(trainer_cfg):
                trainer_cfg.resume_mode, trainer_cfg.resume_from_path = before

"""Wiring of the local trainer: model, policy server, store client, training loop (and optional Python agents)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agl_bridge.errors import ConfigError
from agl_bridge.local import tasks
from agl_bridge.local.backend import LocalBackend
from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer, load_model
from agl_bridge.local.policy import GrpoConfig, Policy
from agl_bridge.local.python_agent import run_python_agents
from agl_bridge.local.server import PolicyServer
from agl_bridge.local.warmup import learn_format
from agl_bridge.log import get_logger
from agl_bridge.store.client import StoreClient
from agl_bridge.store.network import ClientTls, server_ssl_context, warn_if_unreachable
from agl_bridge.training.config import LoopConfig
from agl_bridge.training.empty_steps import TrainingAborted
from agl_bridge.training.loop import TrainingLoop
from agl_bridge.training.report import write_summary
from agl_bridge.training.rollout_correction import resolve_rollout_correction
from agl_bridge.training.run_dir import RunDirectory
from agl_bridge.training.task_files import load_tasks

__all__ = ["LocalTrainerOptions", "build_policy", "run_local_trainer", "write_local_summary"]

log = get_logger("local")

# The built-in task's format warm-up: its lr, then lower ones for a start the first cannot teach (``learn_format``).
WARMUP_LRS = (3e-3, 1e-3, 3e-4)


@dataclass
class LocalTrainerOptions:
    """The local trainer's own settings; ``loop`` is what the training loop does (the schema both trainers share)."""

    store: str
    loop: LoopConfig = field(default_factory=LoopConfig)
    token: str | None = None
    proxy: str | None = None
    model: str | None = None
    task: str = "kind"
    dataset: str | None = None
    lr: float = 1e-3
    ppo_epochs: int = 1
    mini_batch: int | None = None
    warmup_steps: int = 300
    hidden: int = 64
    layers: int = 2
    max_tokens: int = 8
    temperature: float = 1.0
    host: str = "127.0.0.1"
    port: int = 0
    # Across machines: the host the policy URL is published with, the policy server's TLS (mutual with a client CA),
    # and the CA the store's certificate is verified against (default $AGL_CA_FILE).
    advertise_host: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    ca_file: str | None = None
    model_name: str = "agl-local-policy"
    python_agents: int = 0
    summary: str | None = None
    seed: int = 0
    threads: int = 1
    val_dataset: str | None = None
    val_tasks: int = 0
    # Drawn on the reward curve's PNG (``write_local_summary``); training ignores it.
    target: float | None = None
    # The off-policy correction (``--rollout-is``): token or sequence importance weights truncated at
    # ``rollout_is_threshold``, ``off``, or None: token when asynchronous (``loop.max_staleness`` > 0).
    rollout_is: str | None = None
    rollout_is_threshold: float = 2.0
    # A real model: its dtype (float32 or bfloat16), a chat template file for a base model's chat calls, the update's
    # micro-batch (rows per forward/backward), frozen embeddings, gradient clipping, requests sampled in one batch.
    dtype: str | None = None
    chat_template: str | None = None
    micro_batch: int = 8
    freeze_embeddings: bool = False
    grad_clip: float = 1.0
    max_batch: int = 32
    # VERL's KL loss against the weights RL started from (actor.kl_loss_coef, kl_loss_type); 0: none.
    kl_coef: float = 0.0
    kl_type: str = "low_var_kl"
    # AdamW's (beta1, beta2): VERL's actor.optim.betas.
    betas: tuple[float, float] = (0.9, 0.999)


def _dataset(options: LocalTrainerOptions) -> list[Any]:
    if options.dataset:
        return load_tasks(options.dataset)
    if options.task != "kind":
        raise ConfigError(f"unknown built-in task {options.task!r} (kind); give --dataset for your own")
    return tasks.make_tasks(4096, seed=options.seed + 7)


def _val_dataset(options: LocalTrainerOptions) -> list[Any]:
    """``--val-dataset``, or ``--val-tasks`` tasks of the built-in task (drawn with another seed)."""
    if options.val_dataset:
        return load_tasks(options.val_dataset)
    if options.val_tasks > 0:
        if options.dataset:
            raise ConfigError("--val-tasks draws built-in tasks; with your own --dataset give --val-dataset")
        return tasks.make_tasks(options.val_tasks, seed=options.seed + 13)
    return []


def _has_checkpoint(options: LocalTrainerOptions) -> bool:
    return RunDirectory(options.loop.checkpoint_dir).latest() is not None


def build_policy(options: LocalTrainerOptions) -> Policy:
    """The policy from ``--model``, or a new tiny model for the built-in task (warmed up unless resuming)."""
    torch.manual_seed(options.seed)
    configured: dict[str, Any] = {"rollout_is_threshold": options.rollout_is_threshold}
    if options.rollout_is not in (None, "off"):
        configured["rollout_is"] = options.rollout_is
    correction = resolve_rollout_correction(
        configured, options.loop.max_staleness, False if options.rollout_is == "off" else None
    )
    grpo = GrpoConfig(
        lr=options.lr,
        ppo_epochs=options.ppo_epochs,
        mini_batch_size=options.mini_batch,
        micro_batch_size=options.micro_batch,
        freeze_embeddings=options.freeze_embeddings,
        grad_clip=options.grad_clip,
        temperature=options.temperature,
        rollout_correction=correction,
        kl_coef=options.kl_coef,
        kl_type=options.kl_type,
        betas=options.betas,
    )
    if options.model:
        template = Path(options.chat_template).read_text() if options.chat_template else None
        model, tokenizer = load_model(options.model, options.dtype, template)
        if not tokenizer.chat_template:
            log.info("%s has no chat template: /v1/completions only; a chat call stops the run", options.model)
        return Policy(model, tokenizer, grpo, sampling_seed=options.seed, max_batch=options.max_batch)
    if options.dataset:
        raise ConfigError("a custom --dataset needs --model (a local Hugging Face causal LM directory)")
    tokenizer = build_word_tokenizer(tasks.vocabulary())
    config = TinyModelConfig(
        hidden_size=options.hidden, layers=options.layers, intermediate_size=4 * options.hidden, seed=options.seed
    )
    policy = Policy(build_tiny_model(tokenizer, config), tokenizer, grpo, sampling_seed=options.seed)
    if options.warmup_steps > 0 and not _has_checkpoint(options):
        result = learn_format(
            policy,
            tasks.warmup_pairs(4000, seed=options.seed + 1),
            options.warmup_steps,
            WARMUP_LRS,
            batch_size=64,
            seed=options.seed,
        )
        log.info(
            "format warm-up: %d supervised steps at lr %g on random-category answers, loss %.3f, "
            "format probability %.3f",
            result.steps,
            result.lr,
            result.loss,
            result.format_probability,
        )
    return policy


async def _until_fatal(training: Awaitable[Any], fatal: Awaitable[str]) -> Any:
    """Runs ``training`` unless ``fatal`` (the policy server meeting a call it can never answer) comes first; then
    stops with it. A stop (this call cancelled) is passed on to the training, which is waited for: it records on its
    way out what the restart needs (the batch a stop caught being enqueued), while its store client is still open."""
    run, fatal_error = asyncio.ensure_future(training), asyncio.ensure_future(fatal)
    try:
        await asyncio.wait({run, fatal_error}, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            await _stop(run)
            raise TrainingAborted(fatal_error.result())
        return run.result()
    except asyncio.CancelledError:
        # A second stop cancels this wait too, and with it the training's own wait for its last call.
        await _stop(run)
        raise
    finally:
        fatal_error.cancel()


async def _stop(run: asyncio.Future[Any]) -> None:
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    except Exception as error:  # noqa: BLE001 - the stop (or the fatal error) is what the caller sees
        log.warning("the training failed while stopping: %s", error)


async def run_local_trainer(options: LocalTrainerOptions) -> dict[str, Any]:
    """Trains until ``options.loop.total_steps``; returns a summary (rewards per step, versions, timings)."""
    torch.set_num_threads(max(1, options.threads))
    policy = build_policy(options)
    if options.loop.max_staleness > 0:
        # Asynchronous: the policy server keeps generating while a copy of the model trains.
        policy.train_on_copy()
    ssl_context = (
        server_ssl_context(options.tls_cert, options.tls_key, options.tls_client_ca)
        if options.tls_cert and options.tls_key
        else None
    )
    server = PolicyServer(
        policy,
        options.model_name,
        options.host,
        options.port,
        advertise_host=options.advertise_host,
        ssl_context=ssl_context,
    )
    url = await server.start()
    log.info("policy server on %s (model %s; listening on %s)", url, options.model_name, options.host)
    warn_if_unreachable(url, options.store, "--advertise-host (or --host)")
    if options.proxy:
        warn_if_unreachable(options.proxy, options.store, "--proxy (the proxy's address as runners reach it)")
    backend = LocalBackend(
        policy,
        server,
        llm_name=options.loop.llm_name,
        proxy_url=options.proxy,
        sampling={"temperature": options.temperature, "max_tokens": options.max_tokens},
    )
    token = options.token or os.environ.get("AGL_TOKEN") or None
    agents: asyncio.Task[None] | None = None
    try:
        async with StoreClient(options.store, token, tls=ClientTls.from_env(options.ca_file)) as client:
            loop = TrainingLoop(client, backend, _dataset(options), options.loop, val_dataset=_val_dataset(options))
            if options.python_agents > 0:
                agents = asyncio.create_task(run_python_agents(options.store, token, options.python_agents))
            await _until_fatal(loop.run(), server.wait_fatal())
    finally:
        if agents is not None:
            agents.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await agents
        await server.stop()
        policy.close()
    return {**loop.summary(), "policy_requests": server.requests}


def write_local_summary(options: LocalTrainerOptions, summary: dict[str, Any]) -> Path | None:
    """``report.write_summary`` to ``options.summary``, with the local trainer's title and ``options.target``."""
    if not options.summary:
        return None
    title = f"agl local trainer: reward per step (seed {options.seed})"
    return write_summary(options.summary, summary, title=title, target=options.target)

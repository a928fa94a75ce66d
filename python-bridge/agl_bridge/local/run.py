"""Wiring of the local trainer: model, policy server, store client, training loop (and optional Python agents)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agl_bridge.local import tasks
from agl_bridge.local.backend import LocalBackend
from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer, load_model
from agl_bridge.local.policy import GrpoConfig, Policy
from agl_bridge.local.python_agent import run_python_agents
from agl_bridge.local.server import PolicyServer
from agl_bridge.local.warmup import warmup
from agl_bridge.store.client import StoreClient
from agl_bridge.training.empty_steps import TrainingAborted
from agl_bridge.training.loop import LoopConfig, TrainingLoop
from agl_bridge.training.plot import reward_png
from agl_bridge.training.rollout_correction import resolve_rollout_correction
from agl_bridge.training.task_files import load_tasks

__all__ = ["LocalTrainerOptions", "run_local_trainer", "write_summary"]


@dataclass
class LocalTrainerOptions:
    store: str
    token: str | None = None
    proxy: str | None = None
    model: str | None = None
    task: str = "kind"
    dataset: str | None = None
    steps: int = 120
    tasks_per_step: int = 8
    n: int = 8
    lr: float = 1e-3
    ppo_epochs: int = 1
    mini_batch: int | None = None
    warmup_steps: int = 300
    hidden: int = 64
    layers: int = 2
    max_tokens: int = 8
    temperature: float = 1.0
    checkpoint_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    model_name: str = "agl-local-policy"
    resources_id: str = "agl-policy"
    llm_name: str = "main_llm"
    rollout_timeout: float = 300.0
    attempt_timeout: float = 120.0
    python_agents: int = 0
    summary: str | None = None
    seed: int = 0
    threads: int = 1
    val_dataset: str | None = None
    val_tasks: int = 0
    test_freq: int = 10
    val_before_train: bool = True
    val_n: int = 1
    val_temperature: float | None = None
    # Drawn on the reward curve's PNG (``write_summary``); training ignores it.
    target: float | None = None
    # Asynchronous training (``LoopConfig.max_staleness``); the off-policy correction (``--rollout-is``): token or
    # sequence importance weights truncated at ``rollout_is_threshold``, ``off``, or None: token when asynchronous.
    max_staleness: int = 0
    rollout_is: str | None = None
    rollout_is_threshold: float = 2.0
    # A real model: its dtype (float32 or bfloat16), a chat template file for a base model's chat calls, the update's
    # micro-batch (rows per forward/backward), frozen embeddings, gradient clipping, the longest prompt trained on.
    dtype: str | None = None
    chat_template: str | None = None
    micro_batch: int = 8
    freeze_embeddings: bool = False
    grad_clip: float = 1.0
    max_prompt_length: int = 1024
    max_batch: int = 32


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _dataset(options: LocalTrainerOptions) -> list[Any]:
    if options.dataset:
        return load_tasks(options.dataset)
    if options.task != "kind":
        raise SystemExit(f"unknown built-in task {options.task!r} (kind); give --dataset for your own")
    return tasks.make_tasks(4096, seed=options.seed + 7)


def _val_dataset(options: LocalTrainerOptions) -> list[Any]:
    """``--val-dataset``, or ``--val-tasks`` tasks of the built-in task (drawn with another seed)."""
    if options.val_dataset:
        return load_tasks(options.val_dataset)
    if options.val_tasks > 0:
        if options.dataset:
            raise SystemExit("--val-tasks draws built-in tasks; with your own --dataset give --val-dataset")
        return tasks.make_tasks(options.val_tasks, seed=options.seed + 13)
    return []


def _has_checkpoint(options: LocalTrainerOptions) -> bool:
    return bool(options.checkpoint_dir) and (Path(options.checkpoint_dir) / "latest").exists()  # type: ignore[arg-type]


def build_policy(options: LocalTrainerOptions) -> Policy:
    """The policy from ``--model``, or a new tiny model for the built-in task (warmed up unless resuming)."""
    torch.manual_seed(options.seed)
    configured = {"rollout_is_threshold": options.rollout_is_threshold}
    if options.rollout_is not in (None, "off"):
        configured["rollout_is"] = options.rollout_is
    correction = resolve_rollout_correction(
        configured, options.max_staleness, False if options.rollout_is == "off" else None
    )
    grpo = GrpoConfig(
        lr=options.lr,
        ppo_epochs=options.ppo_epochs,
        mini_batch_size=options.mini_batch,
        micro_batch_size=options.micro_batch,
        freeze_embeddings=options.freeze_embeddings,
        grad_clip=options.grad_clip,
        rollout_correction=correction,
    )
    if options.model:
        template = Path(options.chat_template).read_text() if options.chat_template else None
        model, tokenizer = load_model(options.model, options.dtype, template)
        if not tokenizer.chat_template:
            _log(f"[agl] {options.model} has no chat template: /v1/completions only; a chat call stops the run")
        return Policy(model, tokenizer, grpo, sampling_seed=options.seed, max_batch=options.max_batch)
    if options.dataset:
        raise SystemExit("a custom --dataset needs --model (a local Hugging Face causal LM directory)")
    tokenizer = build_word_tokenizer(tasks.vocabulary())
    config = TinyModelConfig(
        hidden_size=options.hidden, layers=options.layers, intermediate_size=4 * options.hidden, seed=options.seed
    )
    policy = Policy(build_tiny_model(tokenizer, config), tokenizer, grpo, sampling_seed=options.seed)
    if options.warmup_steps > 0 and not _has_checkpoint(options):
        result = warmup(
            policy,
            tasks.warmup_pairs(4000, seed=options.seed + 1),
            options.warmup_steps,
            batch_size=64,
            lr=3e-3,
            seed=options.seed,
        )
        _log(
            f"[agl] format warm-up: {result.steps} supervised steps on random-category answers, loss {result.loss:.3f},"
            f" format probability {result.format_probability:.3f}"
        )
    return policy


async def _until_fatal(training: Any, server: PolicyServer) -> Any:
    """Runs ``training`` unless the policy server meets a call it can never answer first; then stops with it."""
    run, fatal = asyncio.ensure_future(training), asyncio.ensure_future(server.wait_fatal())
    try:
        await asyncio.wait({run, fatal}, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            raise TrainingAborted(fatal.result())
        return run.result()
    finally:
        fatal.cancel()


async def run_local_trainer(options: LocalTrainerOptions) -> dict[str, Any]:
    """Trains until ``options.steps``; returns a summary (rewards per step, versions, timings)."""
    torch.set_num_threads(max(1, options.threads))
    policy = build_policy(options)
    if options.max_staleness > 0:
        # Asynchronous: the policy server keeps generating while a copy of the model trains.
        policy.train_on_copy()
    server = PolicyServer(policy, options.model_name, options.host, options.port)
    url = await server.start()
    _log(f"[agl] policy server on {url} (model {options.model_name})")
    backend = LocalBackend(
        policy,
        server,
        llm_name=options.llm_name,
        proxy_url=options.proxy,
        sampling={"temperature": options.temperature, "max_tokens": options.max_tokens},
    )
    config = LoopConfig(
        total_steps=options.steps,
        tasks_per_step=options.tasks_per_step,
        n=options.n,
        resources_id=options.resources_id,
        llm_name=options.llm_name,
        rollout_timeout=options.rollout_timeout,
        attempt_timeout=options.attempt_timeout,
        checkpoint_dir=options.checkpoint_dir,
        max_prompt_length=options.max_prompt_length,
        max_response_length=max(options.max_tokens, 1),
        test_freq=options.test_freq,
        val_before_train=options.val_before_train,
        val_n=options.val_n,
        val_sampling=None if options.val_temperature is None else {"temperature": options.val_temperature},
        max_staleness=options.max_staleness,
    )
    token = options.token or os.environ.get("AGL_TOKEN") or None
    agents: asyncio.Task[None] | None = None
    try:
        async with StoreClient(options.store, token) as client:
            loop = TrainingLoop(client, backend, _dataset(options), config, log=_log, val_dataset=_val_dataset(options))
            if options.python_agents > 0:
                agents = asyncio.create_task(run_python_agents(options.store, token, options.python_agents))
            history = await _until_fatal(loop.run(), server)
    finally:
        if agents is not None:
            agents.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await agents
        await server.stop()
        policy.close()
    summary = {
        **loop.summary(),
        "versions_seen": [r.versions_seen for r in history],
        "response_tokens": [r.response_tokens for r in history],
        "policy_requests": server.requests,
    }
    if loop.val_history:
        _log(
            "[agl] validation reward "
            + "  ".join(
                f"{'before' if v.step == 0 else f'step {v.step}'}: {v.reward_mean:.3f}" for v in loop.val_history
            )
        )
    return summary


def write_summary(options: LocalTrainerOptions, summary: dict[str, Any]) -> Path | None:
    """Writes ``summary`` as JSON to ``options.summary`` and, when a step ran, the reward curve beside it as
    ``NAME-rewards.png``; returns the PNG's path."""
    path = Path(options.summary)  # type: ignore[arg-type]
    path.write_text(json.dumps(summary))
    if not summary["rewards"]:
        return None
    return reward_png(
        path.with_name(f"{path.stem}-rewards.png"),
        summary["rewards"],
        title=f"agl local trainer: reward per step (seed {options.seed})",
        target=options.target,
        validation=[(v["step"], v["reward_mean"]) for v in summary["validation"]],
    )

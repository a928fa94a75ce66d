"""Python agents for the built-in task: a stand-in for the TypeScript runner pool in tests and in-process runs.

Each agent claims rollouts, resolves the rollout's resources, asks the LLM (through the agl proxy when the resource
is a ``proxy_llm``), records the call as a span with the token ids the engine returned (as the TypeScript ``fetch``
hook does) unless the proxy recorded it, emits the reward span, and finishes the attempt.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.local import tasks
from agl_bridge.store.client import StoreClient
from agl_bridge.store.convert import from_struct, from_value, make_span

__all__ = ["answer_rollout", "run_python_agents"]


def bind_proxy(endpoint: str, rollout_id: str, attempt_id: str) -> str:
    base = endpoint.rstrip("/")
    base = base[:-3] if base.endswith("/v1") else base
    return f"{base}/rollout/{rollout_id}/attempt/{attempt_id}/v1"


async def answer_rollout(
    client: StoreClient, http: aiohttp.ClientSession, rollout: types_pb2.Rollout, llm_name: str = "main_llm"
) -> float:
    """Runs the built-in task's agent on one claimed rollout; returns its reward."""
    rollout_id, attempt_id = rollout.rollout_id, rollout.latest_attempt.attempt_id
    snapshot = (
        await client.get_resources(rollout.resources_id)
        if rollout.resources_id
        else (await client.get_latest_resources())
    )
    if snapshot is None or llm_name not in snapshot.resources:
        raise RuntimeError(f"no LLM resource {llm_name!r} for rollout {rollout_id}")
    resource = snapshot.resources[llm_name]
    proxied = resource.WhichOneof("kind") == "proxy_llm"
    llm = resource.proxy_llm if proxied else resource.llm
    endpoint = bind_proxy(llm.endpoint, rollout_id, attempt_id) if proxied else llm.endpoint.rstrip("/")
    sampling = from_struct(llm.sampling_parameters)
    task: dict[str, Any] = from_value(rollout.input)
    body = {
        "model": llm.model,
        "messages": [{"role": "user", "content": tasks.format_prompt(task)}],
        "max_tokens": int(sampling.get("max_tokens", 8)),
        "temperature": float(sampling.get("temperature", 1.0)),
        "return_token_ids": True,
        "logprobs": True,
    }
    async with http.post(f"{endpoint}/chat/completions", json=body) as response:
        response.raise_for_status()
        answer = await response.json()
    choice = answer["choices"][0]
    text = choice["message"]["content"] or ""
    value = tasks.reward(task, text)
    spans = []
    if not proxied:
        logprobs = [float(x["logprob"]) for x in (choice.get("logprobs") or {}).get("content") or []]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": llm.model,
            "agl.llm.source": "openai-fetch",
            "agl.llm.prompt_token_ids": list(answer.get("prompt_token_ids") or []),
            "agl.llm.response_token_ids": list(choice.get("token_ids") or []),
            "agl.llm.resources_id": snapshot.resources_id,
            "agl.llm.resources_version": snapshot.version,
        }
        if logprobs:
            attributes["agl.llm.logprobs"] = logprobs
        spans.append(make_span(rollout_id, attempt_id, "openai.chat.completion", attributes))
    spans.append(
        make_span(
            rollout_id,
            attempt_id,
            "agentlightning.annotation",
            {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value},
        )
    )
    await client.add_spans(spans)
    await client.update_attempt(rollout_id, attempt_id, "succeeded")
    return value


async def _worker(address: str, token: str | None, worker_id: str, concurrency: int, llm_name: str) -> None:
    async with StoreClient(address, token) as client, aiohttp.ClientSession() as http:
        running: set[asyncio.Task[Any]] = set()
        while True:
            free = concurrency - len(running)
            if free <= 0:
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                continue
            claimed = await client.dequeue(limit=free, worker_id=worker_id, wait_seconds=1.0)
            for rollout in claimed:
                task = asyncio.create_task(_run_one(client, http, rollout, llm_name))
                running.add(task)
                task.add_done_callback(running.discard)


async def _run_one(client: StoreClient, http: aiohttp.ClientSession, rollout: types_pb2.Rollout, llm_name: str):
    try:
        await answer_rollout(client, http, rollout, llm_name)
    except Exception:  # noqa: BLE001 - a failed agent fails its attempt; the store retries it per its config
        try:
            await client.update_attempt(rollout.rollout_id, rollout.latest_attempt.attempt_id, "failed")
        except Exception:  # noqa: BLE001
            pass


async def run_python_agents(
    address: str, token: str | None, workers: int, concurrency: int = 16, llm_name: str = "main_llm"
) -> None:
    """Runs ``workers`` agent loops until cancelled."""
    suffix = secrets.token_hex(3)
    await asyncio.gather(
        *(_worker(address, token, f"py-agent-{suffix}-{i}", concurrency, llm_name) for i in range(workers))
    )

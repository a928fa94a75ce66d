"""Test doubles for the training loop without a model: agents that answer rollouts from a script, and a backend that
records what it is asked to train."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.store.client import StoreClient
from agl_bridge.store.convert import from_struct, from_value, llm_resource, make_span
from agl_bridge.store.triplets import mode_name


class ScriptedAgents:
    """Claims rollouts and answers each without an LLM: one chat span with token ids (as the TypeScript fetch hook
    records them) and the reward its task asks for. A task ``{"rewards": [r0, r1, ...]}`` gives the k-th rollout of
    its group ``r_k`` (``None``: no reward span); ``{"fail": true}`` fails every attempt; ``{"hang": true}`` is
    claimed and never answered (the loop cancels it at ``rollout_timeout``). ``runs`` records each attempt: rollout
    id, mode, the snapshot it ran against and its temperature, and the training snapshot's version at that moment
    (``policy_version``)."""

    def __init__(self, address: str, policy_resources_id: str, llm_name: str = "main_llm") -> None:
        self.address, self.policy_resources_id, self.llm_name = address, policy_resources_id, llm_name
        self.runs: list[dict[str, Any]] = []
        self._counts: dict[str, int] = defaultdict(int)

    async def run(self) -> None:
        async with StoreClient(self.address) as client:
            while True:
                for rollout in await client.dequeue(limit=64, worker_id="scripted", wait_seconds=1.0):
                    await self._answer(client, rollout)

    async def _answer(self, client: StoreClient, rollout: types_pb2.Rollout) -> None:
        rollout_id, attempt_id = rollout.rollout_id, rollout.latest_attempt.attempt_id
        task = from_value(rollout.input)
        snapshot = await client.get_resources(rollout.resources_id)
        resource = snapshot.resources[self.llm_name]
        llm = getattr(resource, resource.WhichOneof("kind"))
        policy = await client.get_resources(self.policy_resources_id)
        self.runs.append(
            {
                "rollout_id": rollout_id,
                "mode": mode_name(rollout.mode),
                "resources_id": snapshot.resources_id,
                "resources_version": snapshot.version,
                "temperature": from_struct(llm.sampling_parameters).get("temperature"),
                "policy_version": policy.version,
                "templates": {
                    name: r.prompt_template.template
                    for name, r in snapshot.resources.items()
                    if r.WhichOneof("kind") == "prompt_template"
                },
            }
        )
        if task.get("fail"):
            await client.update_attempt(rollout_id, attempt_id, "failed")
            return
        if task.get("hang"):
            return
        k = self._counts[rollout.group_id]
        self._counts[rollout.group_id] += 1
        rewards = task.get("rewards", [1.0])
        reward = rewards[k % len(rewards)]
        spans = [
            make_span(
                rollout_id,
                attempt_id,
                "openai.chat.completion",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": llm.model,
                    "agl.llm.source": "openai-fetch",
                    "agl.llm.prompt_token_ids": [1, 2, 3 + k],
                    "agl.llm.response_token_ids": [4, 5],
                    "agl.llm.resources_id": snapshot.resources_id,
                    "agl.llm.resources_version": snapshot.version,
                },
            )
        ]
        if reward is not None:
            spans.append(
                make_span(
                    rollout_id,
                    attempt_id,
                    "agentlightning.annotation",
                    {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": float(reward)},
                )
            )
        await client.add_spans(spans)
        await client.update_attempt(rollout_id, attempt_id, "succeeded")


class RecordingBackend:
    """A policy backend without a model: publishes a dummy LLM and records the rollout ids of every batch it is
    asked to train on."""

    pad_token_id = 0

    def __init__(self, temperature: float = 1.0) -> None:
        self.temperature = temperature
        self.trained: list[list[str]] = []
        self.starts = 0

    def resources(self) -> dict[str, types_pb2.Resource]:
        sampling = {"temperature": self.temperature, "max_tokens": 4}
        return {"main_llm": llm_resource("http://127.0.0.1:9/v1", "scripted", sampling_parameters=sampling)}

    async def start(self) -> None:
        self.starts += 1

    async def before_update(self) -> None:
        return None

    async def after_update(self) -> None:
        return None

    async def update(self, data: Any) -> dict[str, float]:
        self.trained.append([str(r) for r in data.non_tensor_batch["rollout_id_list"]])
        await asyncio.sleep(0)
        return {"actor/pg_loss": 0.0}

    def save(self, directory: Any) -> None:
        return None

    def load(self, directory: Any) -> None:
        return None


async def all_rollouts(client: StoreClient) -> list[types_pb2.Rollout]:
    page = await client.query_rollouts(limit=10_000)
    return list(page.rollouts)

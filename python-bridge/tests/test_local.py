"""The local trainer: policy server wire format, a GRPO step that changes the weights and publishes a version, the
full loop against the real store with Python agents, and resume after a kill with nothing trained twice."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")
aiohttp = pytest.importorskip("aiohttp")

from agl_bridge.local import tasks  # noqa: E402
from agl_bridge.local.backend import LocalBackend  # noqa: E402
from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer  # noqa: E402
from agl_bridge.local.policy import GrpoConfig, Policy  # noqa: E402
from agl_bridge.local.python_agent import run_python_agents  # noqa: E402
from agl_bridge.local.run import _until_fatal  # noqa: E402
from agl_bridge.local.server import PolicyServer  # noqa: E402
from agl_bridge.local.warmup import learn_format, warmup  # noqa: E402
from agl_bridge.store.client import StoreClient  # noqa: E402
from agl_bridge.training.loop import LoopConfig, TrainingLoop  # noqa: E402


def tiny_policy(seed: int = 0, warm: bool = True, sampling_seed: int | None = None) -> Policy:
    tokenizer = build_word_tokenizer(tasks.vocabulary())
    model = build_tiny_model(
        tokenizer, TinyModelConfig(hidden_size=32, layers=1, heads=2, intermediate_size=64, seed=seed)
    )
    policy = Policy(model, tokenizer, GrpoConfig(lr=1e-2), sampling_seed=sampling_seed)
    if warm:  # answers in the task's format, right 1/6 of the time: groups with mixed rewards
        warmup(policy, tasks.warmup_pairs(500), 80, batch_size=32, lr=1e-2, max_steps=80)
    return policy


def test_warmup_goes_on_until_the_format_is_learnt_within_its_limit():
    """Ten steps do not teach the format; the warm-up continues in steps of 50 until the answer's first token and end
    token are right for every prompt, or stops at ``max_steps``."""
    learnt = warmup(tiny_policy(warm=False), tasks.warmup_pairs(500), 10, batch_size=32, lr=1e-2, max_steps=400)
    assert learnt.steps > 10 and (learnt.steps - 10) % 50 == 0
    assert learnt.format_probability >= 0.9
    capped = warmup(tiny_policy(warm=False), tasks.warmup_pairs(500), 10, batch_size=32, lr=1e-2, max_steps=10)
    assert capped.steps == 10 and capped.format_probability < 0.9


def test_a_warmup_that_does_not_learn_the_format_is_retried_from_the_start_at_the_next_lr():
    """An lr that cannot teach the format in its steps is followed by the next, from the model's starting weights (the
    result is the next lr's warm-up alone); when none teaches it, the closest attempt is kept."""
    pairs = tasks.warmup_pairs(500)
    retried = tiny_policy(warm=False)
    result = learn_format(retried, pairs, 100, (1e-5, 1e-2), batch_size=32)
    assert result.lr == 1e-2 and result.format_probability >= 0.9
    direct = tiny_policy(warm=False)
    warmup(direct, pairs, 100, batch_size=32, lr=1e-2)
    for name, tensor in direct.model.state_dict().items():
        assert torch.equal(retried.model.state_dict()[name], tensor), name
    closest = tiny_policy(warm=False)
    result = learn_format(closest, pairs, 10, (1e-2, 1e-5), batch_size=32)
    assert result.lr == 1e-2 and 0.0 < result.format_probability < 0.9
    once = tiny_policy(warm=False)
    warmup(once, pairs, 10, batch_size=32, lr=1e-2)
    for name, tensor in once.model.state_dict().items():
        assert torch.equal(closest.model.state_dict()[name], tensor), name


async def test_policy_server_wire_format():
    policy = tiny_policy()
    server = PolicyServer(policy, "tiny")
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            models = await (await http.get(f"{url}/models")).json()
            assert models["data"][0]["id"] == "tiny"
            body = {
                "model": "tiny",
                "messages": [{"role": "user", "content": "kind of fox ?"}],
                "max_tokens": 3,
                "return_token_ids": True,
                "logprobs": True,
                "seed": 3,
            }
            answer = await (await http.post(f"{url}/chat/completions", json=body)).json()
            choice = answer["choices"][0]
            assert answer["prompt_token_ids"] == policy.encode_chat(body["messages"])
            assert 1 <= len(choice["token_ids"]) <= 3
            assert len(choice["logprobs"]["content"]) == len(choice["token_ids"])
            assert all(item["logprob"] <= 0 for item in choice["logprobs"]["content"])
            assert choice["finish_reason"] in ("stop", "length")
            assert answer["usage"]["completion_tokens"] == len(choice["token_ids"])
            # Same seed, same sample; plain requests carry no token fields.
            plain = await (
                await http.post(f"{url}/chat/completions", json={**body, "return_token_ids": False, "logprobs": False})
            ).json()
            assert "prompt_token_ids" not in plain and "token_ids" not in plain["choices"][0]
            assert plain["choices"][0]["message"]["content"] == choice["message"]["content"]
            # Completions with a token-id prompt.
            comp = await (
                await http.post(
                    f"{url}/completions",
                    json={
                        "prompt": answer["prompt_token_ids"],
                        "max_tokens": 2,
                        "logprobs": 0,
                        "return_token_ids": True,
                    },
                )
            ).json()
            assert len(comp["choices"][0]["logprobs"]["token_logprobs"]) == len(comp["choices"][0]["token_ids"])
            # Streaming: prompt ids in the first chunk, the new ids in each chunk.
            stream = await http.post(f"{url}/chat/completions", json={**body, "stream": True})
            chunks = [
                json.loads(line[6:])
                for line in (await stream.text()).splitlines()
                if line.startswith("data: ") and line != "data: [DONE]"
            ]
            assert chunks[0]["prompt_token_ids"] == answer["prompt_token_ids"]
            ids = [t for c in chunks for ch in c["choices"] for t in ch.get("token_ids", [])]
            assert ids == choice["token_ids"]
            bad = await http.post(f"{url}/chat/completions", json={"messages": []})
            assert bad.status == 400
    finally:
        await server.stop()
        policy.close()


def _unpadded(data) -> list[tuple[list[int], list[int]]]:
    rows = []
    for i in range(len(data)):
        p, r = data.batch["prompts"][i], data.batch["responses"][i]
        p_mask = data.batch["attention_mask"][i, : p.shape[0]].bool()
        r_mask = data.batch["attention_mask"][i, p.shape[0] :].bool()
        rows.append((p[p_mask].tolist(), r[r_mask].tolist()))
    return rows


class RecordingBackend(LocalBackend):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = []

    async def update(self, data):
        self.batches.append(_unpadded(data))
        return await super().update(data)


async def _loop(
    address: str, policy: Policy, server: PolicyServer, ckpt: Path | None, steps: int, resources_id: str
) -> tuple[TrainingLoop, RecordingBackend]:
    backend = RecordingBackend(policy, server, sampling={"temperature": 1.0, "max_tokens": 4})
    config = LoopConfig(
        total_steps=steps,
        tasks_per_step=2,
        n=4,
        resources_id=resources_id,
        rollout_timeout=60,
        checkpoint_dir=str(ckpt) if ckpt else None,
        max_response_length=4,
    )
    client = StoreClient(address)
    return TrainingLoop(client, backend, tasks.make_tasks(64), config), backend


async def test_loop_trains_publishes_and_trains_on_the_sampled_ids(store_address, tmp_path):
    policy = tiny_policy()
    server = PolicyServer(policy, "tiny")
    await server.start()
    agents = asyncio.create_task(run_python_agents(store_address, None, 1))
    try:
        loop, backend = await _loop(store_address, policy, server, tmp_path / "ck", 2, "res-a")
        before = {k: v.clone() for k, v in policy.model.state_dict().items()}
        history = await loop.run()
        await loop.client.close()
    finally:
        agents.cancel()
        await server.stop()
        policy.close()
    assert [r.step for r in history] == [0, 1]
    # v1 published at start; each step is served by the version before it and publishes the next.
    assert [r.versions_seen for r in history] == [[1], [2]]
    assert [r.version for r in history] == [2, 3]
    assert all(r.n_rollouts == 8 for r in history)
    after = policy.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before), "the update did not change the weights"
    # Token fidelity: every row of every batch is exactly a (prompt, response) the policy server sampled.
    sampled = {(tuple(p), tuple(r)) for p, r in server.sampled}
    rows = [(tuple(p), tuple(r)) for batch in backend.batches for p, r in batch]
    assert len(rows) == 16 and set(rows) <= sampled
    assert (tmp_path / "ck" / "latest").read_text() == "step-000002"


async def test_kill_and_restart_resumes_without_training_anything_twice(store_address, tmp_path):
    ckpt = tmp_path / "ck"
    agents = asyncio.create_task(run_python_agents(store_address, None, 1))
    try:
        # First run: 2 steps, then "killed" after enqueueing step 3 (pending.json written, never trained).
        policy = tiny_policy()
        server = PolicyServer(policy, "tiny")
        await server.start()
        loop, _ = await _loop(store_address, policy, server, ckpt, 2, "res-b")
        await loop.run()
        loop.config.total_steps = 3
        pending_ids = await loop._enqueue(loop.step)
        saved = {k: v.clone() for k, v in policy.model.state_dict().items()}
        await loop.client.close()
        await server.stop()
        policy.close()

        # Restart with a fresh (differently initialised) model: it must come back from the checkpoint.
        policy2 = tiny_policy(seed=99, warm=False)
        server2 = PolicyServer(policy2, "tiny")
        await server2.start()
        loop2, _ = await _loop(store_address, policy2, server2, ckpt, 4, "res-b")
        assert loop2.resume()
        assert loop2.step == 2
        assert all(torch.equal(saved[k], v) for k, v in policy2.model.state_dict().items())
        loop2.step, loop2.version = 2, loop2.version
        history = await loop2.run()
        await loop2.client.close()
        await server2.stop()
        policy2.close()
    finally:
        agents.cancel()
    assert [r.step for r in history] == [2, 3]
    lines = [json.loads(line) for line in (ckpt / "history.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2, 3]
    ids = [rid for line in lines for rid in line["rollout_ids"]]
    assert len(ids) == 32 and len(set(ids)) == 32, "a rollout was trained twice"
    # Step 3 (index 2) trained exactly the rollouts enqueued before the kill.
    assert sorted(lines[2]["rollout_ids"]) == sorted(pending_ids)


async def test_a_stop_reaches_the_training_and_waits_for_what_it_records_on_its_way_out():
    """SIGTERM cancels the trainer's task. The stop must reach the training and wait for it: a stop that caught
    ``_enqueue``'s call in flight lets the call finish and records its rollouts (pending.json) before the store client
    closes. Without that, a stop in that window left the enqueued step neither trained nor pending."""
    recorded: list[str] = []
    in_flight = asyncio.Event()

    async def training() -> None:
        call = asyncio.ensure_future(asyncio.sleep(0.2, result="the step's rollouts"))
        in_flight.set()
        try:
            await asyncio.shield(call)
        except asyncio.CancelledError:
            await asyncio.wait([call])
            recorded.append(call.result())
            raise

    stopping = asyncio.ensure_future(_until_fatal(training(), asyncio.Event().wait()))
    await in_flight.wait()
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert recorded == ["the step's rollouts"]


async def test_a_second_stop_ends_the_wait_for_the_training():
    stopped_waiting = asyncio.Event()

    async def training() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            try:
                await asyncio.Event().wait()  # a last call that never answers
            finally:
                stopped_waiting.set()

    stopping = asyncio.ensure_future(_until_fatal(training(), asyncio.Event().wait()))
    await asyncio.sleep(0.05)
    stopping.cancel()
    await asyncio.sleep(0.05)
    assert not stopping.done(), "the first stop did not wait for the training"
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(stopping, 5)
    assert stopped_waiting.is_set()


def test_sigkill_of_the_trainer_process_and_restart(store_address, tmp_path):
    """The real thing: `python -m agl_bridge.local` killed with SIGKILL mid-training, then started again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    ckpt = tmp_path / "ck"
    command = [
        sys.executable,
        "-m",
        "agl_bridge.local",
        "--store",
        store_address,
        "--checkpoint-dir",
        str(ckpt),
        "--tasks-per-step",
        "2",
        "--n",
        "4",
        "--warmup-steps",
        "20",
        "--hidden",
        "32",
        "--layers",
        "1",
        "--python-agents",
        "1",
        "--resources-id",
        "res-kill",
        "--attempt-timeout",
        "3",
    ]
    history = ckpt / "history.jsonl"
    first = subprocess.Popen(
        [*command, "--steps", "50"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if history.exists() and len(history.read_text().splitlines()) >= 2:
                break
            assert first.poll() is None, "the trainer exited early"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
    finally:
        first.wait(timeout=30)
    killed_at = len({json.loads(line)["step"] for line in history.read_text().splitlines()})
    target = killed_at + 2
    second = subprocess.run([*command, "--steps", str(target)], capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed from" in second.stderr
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(target)), "a step was lost or trained twice"
    ids = [rid for line in lines for rid in line["rollout_ids"]]
    assert len(ids) == len(set(ids)), "a rollout was trained twice"


def test_a_sampling_seed_makes_each_prompts_samples_independent_of_request_order():
    """Runners send a step's requests in any order: with a sampling seed the samples each prompt gets are the same."""
    chat = tiny_policy(warm=False).encode_chat
    prompts = [chat([{"role": "user", "content": f"kind of {w} ?"}]) for w in ("fox", "red")]

    def draws(policy: Policy, order: list[int]) -> dict[int, list[list[int]]]:
        out: dict[int, list[list[int]]] = {0: [], 1: []}
        for i in order:
            out[i].append(policy.generate_sync(prompts[i], 6, temperature=1.0).token_ids)
        return out

    first = draws(tiny_policy(warm=False, sampling_seed=3), [0, 0, 1, 1, 0, 1])
    assert first == draws(tiny_policy(warm=False, sampling_seed=3), [1, 0, 1, 0, 1, 0])
    assert first != draws(tiny_policy(warm=False, sampling_seed=4), [0, 0, 1, 1, 0, 1])
    assert len({tuple(ids) for ids in first[0]}) > 1, "draws of one prompt differ from each other"


def test_build_policy_is_determined_by_the_seed():
    from agl_bridge.local.run import LocalTrainerOptions, build_policy

    def weights(seed: int) -> list[Any]:
        options = LocalTrainerOptions(store="", seed=seed, warmup_steps=3, hidden=32, layers=1)
        return [p.detach().clone() for p in build_policy(options).model.parameters()]

    a, b, c = weights(1), weights(1), weights(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


async def test_local_trainer_validates_and_prints(store_address, caplog, tmp_path):
    """`python -m agl_bridge.local --val-tasks 4 --test-freq 1 --val-n 2 --val-temperature 0`, in process."""
    from agl_bridge.local.run import LocalTrainerOptions, run_local_trainer

    options = LocalTrainerOptions(
        store=store_address,
        loop=LoopConfig(
            total_steps=2,
            tasks_per_step=2,
            n=4,
            resources_id="res-local-val",
            test_freq=1,
            val_n=2,
            val_sampling={"temperature": 0.0},
        ),
        warmup_steps=20,
        hidden=32,
        layers=1,
        python_agents=1,
        val_tasks=4,
    )
    with caplog.at_level(logging.INFO, logger="agl_bridge"):
        summary = await run_local_trainer(options)
    err = caplog.text
    validations = summary["validation"]
    assert [(v["step"], v["version"], v["n"]) for v in validations] == [(0, 1, 8), (1, 2, 8), (2, 3, 8)]
    for v in validations:
        m = v["metrics"]
        assert m["val/n_succeeded"] == 8 and m["val/n_rollouts_w_reward"] == 8
        # Greedy (temperature 0 reached the policy server): both rollouts of a task answer alike.
        assert m["val/reward_best@2"] == pytest.approx(v["reward_mean"])
    assert "validation before training (policy v1): reward" in err
    assert "validation after step 2/2 (policy v3): reward" in err
    assert "validation reward before:" in err
    assert summary["steps"] == [0, 1] and summary["versions_seen"] == [[1], [2]]

    from agl_bridge.local.run import write_local_summary

    options.summary = str(tmp_path / "summary.json")
    png = write_local_summary(options, summary)
    assert json.loads((tmp_path / "summary.json").read_text())["rewards"] == summary["rewards"]
    assert png == tmp_path / "summary-rewards.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_kl_loss_holds_the_update_to_the_weights_rl_started_from(tmp_path):
    """``kl_coef``: VERL's KL loss against the weights the first update started from — 0 on that update, positive
    after, keeping the weights closer to those than the same updates without it; a checkpoint keeps the reference."""
    from rollouts import rollout, triplet

    from agl_bridge.training.advantage import compute_rollout_level_advantage
    from agl_bridge.training.dataproto import ConvertOptions, to_dataproto

    batch = [
        rollout(f"r{i}", "g", [triplet([3, 6, 7], [8 + i % 3, 5])], final_reward=float(i % 3 == 0)) for i in range(6)
    ]

    def data() -> Any:
        d, _ = to_dataproto(batch, ConvertOptions(pad_token_id=0))
        return compute_rollout_level_advantage(d, "grpo")[0]

    plain, held = tiny_policy(warm=False), tiny_policy(warm=False)
    held.grpo.kl_coef = 1.0
    start = {k: v.clone() for k, v in held.model.state_dict().items()}
    kl = [held.update_sync(data())["actor/kl_loss"] for _ in range(6)]
    for _ in range(6):
        assert "actor/kl_loss" not in plain.update_sync(data())

    def moved(policy: Policy) -> float:
        return sum(float((v - start[k]).norm() ** 2) for k, v in policy.model.state_dict().items()) ** 0.5

    assert kl[0] == pytest.approx(0.0, abs=1e-7) and all(k > 0 for k in kl[1:])
    assert moved(held) < moved(plain)
    assert held.reference is not None and plain.reference is None
    server = PolicyServer(held, "tiny")
    LocalBackend(held, server).save(tmp_path)
    resumed = tiny_policy(seed=1, warm=False)
    LocalBackend(resumed, PolicyServer(resumed, "tiny")).load(tmp_path)
    assert resumed.reference is not None
    for k, v in resumed.reference.state_dict().items():
        assert torch.equal(v, start[k])
    for policy in (plain, held, resumed):
        policy.close()

"""VERL's own trainer on CPU: the CPU config, agl's registrations with VERL, the CPU rollout replica's engine, and
``scripts/verl_cpu_smoke.py`` — two real VERL training steps end to end (TypeScript runners, proxy, StreamTriplets,
FSDP2 actor update on gloo, weights pushed to the replica, next version published and served), checked from outside:
the replica's weights and a fixed prompt's log-probs change, VERL's ``actor/*`` metrics are logged, validation runs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

import aiohttp  # noqa: E402

from agl_bridge.verl import compose_config  # noqa: E402
from agl_bridge.verl.compose import device_overrides  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path is taken only without CUDA")


def test_cpu_config_is_verl_config_with_cpu_choices():
    cfg = compose_config(["agl_device=cpu", "actor_rollout_ref.actor.optim.lr=0.01"])
    assert cfg.trainer.device == "cpu" and cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.actor_rollout_ref.rollout.name == "agl_cpu"
    assert cfg.actor_rollout_ref.model.external_lib == "agl_bridge.verl.cpu"
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_USE_EXTERNAL_MODULES == "agl_bridge.verl.cpu" and env.VERL_PLATFORM == "cpu"
    assert cfg.ray_kwargs.ray_init.include_dashboard is False
    # Command-line overrides win over the CPU defaults; VERL's tree is otherwise untouched.
    assert cfg.actor_rollout_ref.actor.optim.lr == 0.01
    assert compose_config().actor_rollout_ref.actor.strategy == "fsdp"


def test_device_overrides():
    assert device_overrides(["trainer.device=cpu", "x=1"]) == ["agl_device=cpu", "trainer.device=cpu", "x=1"]
    assert device_overrides(["trainer.device=cuda"]) == ["trainer.device=cuda"]
    assert device_overrides(["agl_device=cpu"]) == ["agl_device=cpu"]
    assert ("agl_device=cpu" in device_overrides([])) == (not torch.cuda.is_available())


@cpu_only
def test_cpu_registrations_and_patches():
    from verl.utils.attention_utils import index_first_axis, pad_input, unpad_input
    from verl.utils.device import get_device_id, get_device_name, get_nccl_backend, get_torch_device
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from agl_bridge.verl import cpu
    from agl_bridge.verl.cpu_rollout import CpuPolicyReplica, CpuRolloutAdapter

    cpu.install()
    # VERL's platform: cpu, gloo, and a device module whose allocator calls answer.
    assert (get_device_name(), get_nccl_backend(), get_device_id()) == ("cpu", "gloo", "cpu")
    device = get_torch_device()
    assert device.memory_reserved() == 0 and device.mem_get_info()[1] > 0 and device.empty_cache() is None
    assert torch.equal(device.get_rng_state(), torch.get_rng_state())
    assert "cpu" in EngineRegistry._engines["language_model"]["fsdp2"]
    assert RolloutReplicaRegistry.get(cpu.CPU_ROLLOUT) is CpuPolicyReplica
    assert get_rollout_class(cpu.CPU_ROLLOUT, "async") is CpuRolloutAdapter
    assert transformer_impl.CPUOffloadPolicy(pin_memory=True).pin_memory is False
    # The FSDP engine's log-probs without VERL's row loop: the same values and gradients.
    from verl.utils.torch_functional import logprobs_from_logits_v2

    logits = torch.randn(50, 11, dtype=torch.float32, requires_grad=True)
    labels = torch.randint(0, 11, (50,))
    fast = transformer_impl.logprobs_from_logits(logits, labels)
    (grad_fast,) = torch.autograd.grad(fast.sum(), logits)
    slow = logprobs_from_logits_v2(logits, labels)
    (grad_slow,) = torch.autograd.grad(slow.sum(), logits)
    assert torch.allclose(fast, slow, atol=1e-6) and torch.allclose(grad_fast, grad_slow, atol=1e-6)
    assert transformer_impl.logprobs_from_logits(logits.bfloat16(), labels).dtype == torch.float32
    # VERL 0.9's own padding helpers without flash-attn (no agl patch any more): pure torch, same results.
    hidden = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[0, 1, 1], [1, 1, 0]])
    unpadded, indices, *_ = unpad_input(hidden, mask)
    assert unpadded.shape == (4, 4) and torch.equal(index_first_axis(hidden.reshape(6, 4), indices), unpadded)
    assert torch.equal(pad_input(unpadded, indices, 2, 3), hidden * mask.unsqueeze(-1))
    cpu_worker = cpu.cpu_actor_rollout_worker()
    from verl.workers.engine_workers import ActorRolloutRefWorker

    assert (
        issubclass(cpu_worker, ActorRolloutRefWorker) and cpu_worker.init_model is not ActorRolloutRefWorker.init_model
    )


def _tiny_model_dir(path: Path) -> Path:
    from agl_bridge.local import tasks
    from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer

    tokenizer = build_word_tokenizer(tasks.vocabulary())
    model = build_tiny_model(tokenizer, TinyModelConfig(hidden_size=32, layers=1, heads=2, intermediate_size=64))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_weight_delta_carries_every_changed_tensor_and_no_unchanged_one_twice():
    from agl_bridge.verl.cpu_rollout import WeightDelta

    delta = WeightDelta()
    weights = {"a": torch.zeros(10_000), "b": torch.ones(3)}

    def push() -> list[str]:
        return [k for k, v in weights.items() if delta.changed(k, v)]

    assert push() == ["a", "b"]  # the first push: everything
    assert push() == []
    weights["a"][1] = 1.0  # one value between the sampled ones (every 2nd): found by the whole-tensor digest
    assert push() == ["a"]
    weights["b"] += 1.0  # found by the sample
    assert push() == ["b"]
    # Changed by its sample last time, "b" has no whole digest yet: it goes once more, then stays behind.
    assert push() == ["b"]
    assert push() == []


async def test_cpu_replica_engine_serves_and_swaps_weights(tmp_path):
    """The replica's engine (what ``CpuPolicyReplica`` runs as a Ray actor): vLLM-style token ids over HTTP, VERL's
    token-in/token-out ``generate``, and a weight swap that changes what it serves."""
    from agl_bridge.verl.cpu_rollout import CpuPolicyServer, WeightDelta, weights_digest

    model_dir = _tiny_model_dir(tmp_path / "model")
    config = types.SimpleNamespace(response_length=4)
    server = CpuPolicyServer(config, types.SimpleNamespace(path=str(model_dir)), replica_rank=0)
    host, port = await server.launch_server()
    base = f"http://{host}:{port}"
    body = {"prompt": "kind of fox ?", "max_tokens": 3, "temperature": 0, "logprobs": 1, "return_token_ids": True}
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/v1/completions", json=body) as r:
                first = await r.json()
            async with http.get(f"{base}/agl/weights") as r:
                before = await r.json()
            out = await server.generate(first["prompt_token_ids"], {"temperature": 0, "max_tokens": 3}, "req-1")
            assert out.token_ids == first["choices"][0]["token_ids"]
            assert out.log_probs == pytest.approx(first["choices"][0]["logprobs"]["token_logprobs"], abs=1e-5)
            weights = {k: v + 0.05 * torch.randn_like(v) for k, v in server.policy.model.state_dict().items()}
            digest = await server.update_weights(weights, global_steps=1)
            async with http.get(f"{base}/agl/weights") as r:
                after = await r.json()
            async with http.post(f"{base}/v1/completions", json=body) as r:
                second = await r.json()
        assert (before["policy_version"], after["policy_version"]) == (0, 1)
        assert after["digest"] == digest != before["digest"] and after["global_steps"] == 1
        assert second["system_fingerprint"].endswith("-v1")
        lps = (first["choices"][0]["logprobs"]["token_logprobs"], second["choices"][0]["logprobs"]["token_logprobs"])
        assert lps[0] != lps[1]
        with pytest.raises(KeyError, match="do not match"):
            await server.update_weights({"no.such.weight": torch.zeros(1)})

        # A worker's pushes (CpuRolloutAdapter): the first carries every tensor, the next only what changed, on the
        # weights the replica still serves; the digest is then that of the sender's whole model.
        trained = copy.deepcopy(server.policy.model)
        delta = WeightDelta()
        full = {k: v for k, v in trained.state_dict().items() if delta.changed(k, v)}
        served = await server.update_weights(full, 2)
        with torch.no_grad():
            trained.get_parameter("model.norm.weight").add_(0.5)
        changed = {k: v for k, v in trained.state_dict().items() if delta.changed(k, v)}
        assert list(changed) == ["model.norm.weight"] and len(full) > 5
        assert await server.update_weights(changed, 3, served) == weights_digest(trained) != served
        with pytest.raises(KeyError, match="push every tensor"):
            await server.update_weights(changed, 4, served)  # no longer what the replica serves
    finally:
        await server.server.stop()
        server.policy.close()


async def test_cpu_replica_sampling_follows_the_rollout_seed(tmp_path):
    """The replica samples from VERL's ``rollout.seed`` as the local policy server does from its ``--seed``: the same
    seed draws the same ids for the same prompts in the same order of draws (a VERL run can be repeated), another
    seed other ids; successive draws of one prompt differ."""
    from agl_bridge.verl.cpu_rollout import CpuPolicyServer

    model = types.SimpleNamespace(path=str(_tiny_model_dir(tmp_path / "model")))
    prompt = [3, 6, 7, 22, 8, 5, 4]
    sampling = {"temperature": 1.0, "max_tokens": 6}

    async def draws(seed: int | None) -> list[list[int]]:
        server = CpuPolicyServer(types.SimpleNamespace(response_length=6, seed=seed), model, replica_rank=0)
        try:
            return [(await server.generate(prompt, sampling, f"r{i}")).token_ids for i in range(4)]
        finally:
            server.policy.close()

    first, again, other = await draws(7), await draws(7), await draws(8)
    assert first == again
    assert first != other
    assert len({tuple(ids) for ids in first}) > 1


@cpu_only
@pytest.mark.parametrize("old_log_probs", ["bypass", "own"])
def test_verl_actor_update_is_the_local_trainers_on_the_same_rows(old_log_probs):
    """VERL's own actor worker (FSDP2 engine, ``ppo_loss``, optimizer) and the local trainer, fed the same rows from
    the same weights, make the same update for three steps (``scripts/verl_same_update.py``, with the demos' KL loss):
    the loss's scaling over tokens and micro-batches, the KL term, the optimizer and the clipping agree, to float
    rounding — with the engine's log-probs as the old ones (VERL's bypass mode), and with none sent (an on-policy
    update on CPU: agl's engine takes the update's own)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python-bridge")}
    flags = ["--kl", "0.01"] + (["--own-old-log-probs"] if old_log_probs == "own" else [])
    result = subprocess.run(
        [sys.executable, str(REPO / "python-bridge" / "scripts" / "verl_same_update.py"), *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "verl-same-update: same update" in result.stdout
    assert result.stdout.count("grad norm local") == 3


@cpu_only
def test_verl_cpu_smoke(tmp_path):
    """Two real VERL training steps on CPU, end to end (``make verl-cpu-smoke``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python-bridge")}
    result = subprocess.run(
        [sys.executable, str(REPO / "python-bridge" / "scripts" / "verl_cpu_smoke.py"), "--dir", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:] + "\n" + (tmp_path / "train.log").read_text()[-8000:]
    assert "verl-cpu-smoke: 2 steps, weights changed, served v3" in result.stdout

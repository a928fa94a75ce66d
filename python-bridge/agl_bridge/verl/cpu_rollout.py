"""agl's CPU rollout replica for VERL (``actor_rollout_ref.rollout.name=agl_cpu``): VERL's ``RolloutReplica`` /
``BaseRollout`` pair, as vLLM's, with agl's local policy server as the engine.

- ``CpuPolicyReplica`` (trainer side, from ``RolloutReplicaRegistry``) starts one Ray actor per replica,
  ``CpuPolicyServer``: the actor's weights in a ``Policy`` served by ``PolicyServer`` — OpenAI-compatible HTTP with
  vLLM's token-id fields, which agl publishes behind its LLM proxy — and VERL's token-in/token-out ``generate`` for
  VERL's own agent loop.
- ``CpuRolloutAdapter`` (worker side, in each FSDP actor process) takes the weights VERL's ``update_weights`` yields
  (full tensors, gathered by FSDP) and hands them to its replica's server, which swaps them in on the policy's thread:
  no generation sees half an update.
"""

from __future__ import annotations

import hashlib
import os
import ssl
from typing import Any
from urllib.parse import urlsplit

import ray
import torch
from aiohttp import web
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator

from agl_bridge.store.network import server_ssl_context

__all__ = ["CpuPolicyReplica", "CpuPolicyServer", "CpuRolloutAdapter", "server_actor_name"]


def engine_ssl_context() -> ssl.SSLContext | None:
    """The CPU replicas' TLS, from ``$AGL_ENGINE_TLS_CERT`` and ``$AGL_ENGINE_TLS_KEY``; None without."""
    cert, key = os.environ.get("AGL_ENGINE_TLS_CERT"), os.environ.get("AGL_ENGINE_TLS_KEY")
    return server_ssl_context(cert, key) if cert and key else None


def server_actor_name(replica_rank: int) -> str:
    return f"agl_cpu_server_{replica_rank}"


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(torch.float32).contiguous().reshape(-1)


def _digest(flat: torch.Tensor) -> bytes:
    return hashlib.blake2b(flat.contiguous().numpy(), digest_size=16).digest()


def tensor_digest(tensor: torch.Tensor) -> bytes:
    """A digest of one tensor's values (as float32): tells two versions of a tensor apart."""
    return _digest(_flat(tensor))


def _combined(digests: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name, digest in sorted(digests.items()):
        h.update(name.encode())
        h.update(digest)
    return h.hexdigest()[:16]


def weights_digest(model: torch.nn.Module) -> str:
    """A short digest of every parameter's values (a tied one once): tells two weight versions apart."""
    return _combined({name: tensor_digest(p) for name, p in model.named_parameters()})


class WeightDelta:
    """The worker side of a push: which tensors changed since the last push. The first push carries every tensor;
    later ones only those whose values changed (with frozen embeddings, Gemma 3 270M's 262k x 640 embedding — 63 %
    of its bytes — is never sent again).

    Exact and cheap where everything trains: a digest of ``SAMPLE`` evenly spaced values tells most changed tensors
    at once; only a tensor whose sample is unchanged is hashed whole, and left out when that digest matches the one
    of the values last sent."""

    SAMPLE = 4096

    def __init__(self) -> None:
        self.samples: dict[str, bytes] = {}
        self.digests: dict[str, bytes] = {}

    def changed(self, name: str, tensor: torch.Tensor) -> bool:
        flat = _flat(tensor)
        sample = _digest(flat[:: max(1, flat.numel() // self.SAMPLE)])
        known, self.samples[name] = self.samples.get(name), sample
        if known is not None and known != sample:
            self.digests.pop(name, None)
            return True
        digest = _digest(flat)
        same = self.digests.get(name) == digest
        self.digests[name] = digest
        return not same


class CpuPolicyServer:
    """One replica's engine (a Ray actor): loads the model at ``model_config.path`` and serves it."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        from verl.utils.fs import copy_to_local

        from agl_bridge.local.model import load_model
        from agl_bridge.local.policy import Policy
        from agl_bridge.local.server import PolicyServer

        # OMP_NUM_THREADS from the Ray runtime env (cpu.yaml: 1; make demo-real: 2, a real model on its own phase).
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or 1)))
        self.config, self.replica_rank = config, replica_rank
        model, tokenizer = load_model(copy_to_local(str(model_config.path)))
        # VERL's rollout.seed (vLLM's sampling seed), as the local policy server's --seed: a request without a seed
        # of its own draws from (seed, weights version, prompt, draw number), whatever order the runners' requests
        # come in, so a run can be repeated. None (a config without the key): unseeded.
        seed = getattr(config, "seed", None)
        # rollout.max_num_seqs (vLLM's): the most concurrent requests sampled as one batch.
        max_batch = int(getattr(config, "max_num_seqs", None) or 32)
        self.policy = Policy(model, tokenizer, max_batch=max_batch, sampling_seed=None if seed is None else int(seed))
        # Across machines: listen on $AGL_ENGINE_HOST (default loopback) and report $AGL_ENGINE_ADVERTISE_HOST, the
        # address the proxy dials, to VERL (which agl publishes); TLS with $AGL_ENGINE_TLS_CERT and _KEY. Ray actors
        # inherit the driver's environment.
        self.server = PolicyServer(
            self.policy,
            str(model_config.path),
            host=os.environ.get("AGL_ENGINE_HOST") or "127.0.0.1",
            advertise_host=os.environ.get("AGL_ENGINE_ADVERTISE_HOST") or None,
            ssl_context=engine_ssl_context(),
        )
        # What weights the replica serves (tests, the smoke check): version and digest.
        self.server.app.router.add_get("/agl/weights", self._weights)
        self.global_steps: int | None = None
        # Digests per parameter (a tied one under its first name): a partial push re-hashes only what it carried.
        canonical = {id(p): name for name, p in model.named_parameters()}
        self._names = {alias: canonical[id(p)] for alias, p in model.named_parameters(remove_duplicate=False)}
        self._digests = {name: tensor_digest(p) for name, p in model.named_parameters()}
        self.digest = _combined(self._digests)

    async def launch_server(self) -> tuple[str, int]:
        url = await self.server.start()
        parts = urlsplit(url)
        return parts.hostname or "127.0.0.1", int(parts.port or 80)

    async def _weights(self, _: web.Request) -> web.Response:
        return web.json_response(
            {"policy_version": self.policy.weights_version, "digest": self.digest, "global_steps": self.global_steps}
        )

    async def update_weights(
        self,
        weights: dict[str, torch.Tensor],
        global_steps: int | None = None,
        base_digest: str | None = None,
    ) -> str:
        """Loads ``weights`` between two generations and returns the digest of what it then serves: every
        parameter by its Hugging Face name, or — with ``base_digest``, the digest the sender's last push returned —
        only those that changed since (``WeightDelta``), refused unless the replica still serves those weights."""

        def load() -> str:
            model = self.policy.model
            if base_digest is not None and base_digest != self.digest:
                raise KeyError(
                    f"a partial weight push on weights {base_digest}, but the replica serves {self.digest}: push"
                    " every tensor"
                )
            missing, unexpected = model.load_state_dict(weights, strict=False)
            if base_digest is not None:
                missing = []
            if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
                raise KeyError(f"weights do not match the replica's model: missing {missing}, unexpected {unexpected}")
            for name in {self._names[alias] for alias in weights if alias in self._names}:
                self._digests[name] = tensor_digest(model.get_parameter(name))
            self.policy.weights_version += 1
            return _combined(self._digests)

        self.digest = await self.policy.run(load)
        self.global_steps = global_steps
        return self.digest

    async def generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str, **_: Any
    ) -> TokenOutput:
        """VERL's token-in/token-out call (its agent loop's ``server.generate``)."""
        limit = int(getattr(self.config, "response_length", 64))
        max_tokens = int(sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens") or limit)
        temperature = float(sampling_params.get("temperature", 1.0))
        top_p = float(sampling_params.get("top_p", 1.0))
        g = await self.policy.generate(list(prompt_ids), min(max_tokens, limit), temperature=temperature, top_p=top_p)
        # "stop" (EOS or a stop token) or "length" (max_tokens), as VERL's own servers report a cut answer.
        return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs, stop_reason=g.finish_reason)

    # The engine keeps its weights in host memory between updates: sleep and wake-up free and restore nothing.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def wait_for_requests_to_drain(self) -> None:
        # Calls queue in the policy's batch queue, then on its one thread: drain returns once those before it are done.
        await self.policy.drain()

    async def abort_all_requests(self, **_: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class CpuPolicyReplica(RolloutReplica):
    """A replica whose engine is ``CpuPolicyServer``; its address is the policy server's ``host:port``."""

    async def launch_servers(self) -> None:
        server = (
            ray.remote(CpuPolicyServer)
            .options(name=server_actor_name(self.replica_rank), num_cpus=1, max_concurrency=self.max_concurrency)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        host, port = await server.launch_server.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"{host}:{port}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


class CpuRolloutAdapter(BaseRollout):
    """Worker side: each actor worker sends the full weights to the server of the replica it belongs to (rollout rank
    0 of each replica; every rank walks the generator, since FSDP gathers each tensor collectively)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", 0))
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self._server: Any = None
        self._delta = WeightDelta()
        # The digest the replica returned for this worker's last push (None before the first: a full push).
        self._served: str | None = None

    def _server_handle(self) -> Any:
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Any, global_steps: int | None = None, **_: Any) -> None:
        # Only what changed since this worker's last push travels (WeightDelta); the replica checks that it still
        # serves the weights that push left.
        sender = self.rollout_rank == 0
        state: dict[str, torch.Tensor] = {}
        async for name, tensor in ensure_async_iterator(weights):
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            if sender and self._delta.changed(name, full):
                state[name] = full.detach().to("cpu", copy=True)
        if sender:
            self._served = await self._server_handle().update_weights.remote(state, global_steps, self._served)

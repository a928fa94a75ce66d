"""VERL's own trainer on CPU: the registrations and the few patches VERL 0.9.1 needs to run its V1 PPO trainer's
machinery (FSDP2 actor on gloo, its log-prob and update code, weight push to a rollout replica) without a GPU.

This module is VERL's plugin: the CPU config (``config/agl_device/cpu.yaml``) names it in ``VERL_USE_EXTERNAL_MODULES``
(Ray's ``runtime_env``, read by ``verl/__init__.py`` in every Ray process) and in ``actor_rollout_ref.model.
external_lib``, so importing it registers everything everywhere. Nothing happens when a GPU is present: there the
trainer runs exactly as on VERL's GPU path (``scripts/gpu-smoke.sh``).

Each piece names the VERL limitation it covers. What is not a patch — a resource pool without GPUs, the gloo process
group — is a subclass, wired by ``AglRayPPOTrainer._init_resource_pool_mgr`` (``trainer.py``).
"""

from __future__ import annotations

import dataclasses
import types
from contextlib import contextmanager
from typing import Any

import torch

__all__ = [
    "CPU_ROLLOUT",
    "cpu_actor_rollout_worker",
    "cpu_resource_pool_manager",
    "install",
    "is_cpu",
]

# The rollout name agl's CPU replica is registered under (``actor_rollout_ref.rollout.name``).
CPU_ROLLOUT = "agl_cpu"
# The VERL platform agl registers for CPU (``VERL_PLATFORM``, set in cpu.yaml's Ray runtime_env).
CPU_PLATFORM = "cpu"

_installed = False


def is_cpu(config: Any = None) -> bool:
    """Whether the trainer runs on CPU: ``trainer.device=cpu`` in ``config``, else no CUDA device here."""
    if config is not None:
        device = config.get("trainer", {}).get("device")
        if device:
            return str(device) == "cpu"
    return not torch.cuda.is_available()


def install() -> None:
    """Registers agl's CPU pieces with VERL and applies the CPU patches (once per process; nothing on GPU)."""
    global _installed
    if _installed or torch.cuda.is_available():
        return
    _installed = True
    _register_platform()
    _register_engines()
    _register_rollout()
    _patch_unpinned_offload()
    _patch_row_loop_log_probs()


def _cpu_device_module() -> types.ModuleType:
    # VERL calls its platform's device module for allocator and stream functions (get_torch_device().empty_cache(),
    # mem_get_info(), memory_reserved(), get_rng_state(), ... in aggressive_empty_cache, log_gpu_memory_usage, the
    # workers' perf metrics and checkpoints); torch.cpu has only some of them. CPU memory has no caching allocator to
    # report or empty: zeros and no-ops, and the machine's memory for mem_get_info.
    import psutil

    def zero(*_: Any, **__: Any) -> int:
        return 0

    def nothing(*_: Any, **__: Any) -> None:
        return None

    def mem_get_info(*_: Any, **__: Any) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return int(memory.available), int(memory.total)

    module = types.ModuleType("agl_cpu_device")
    module.__dict__.update({name: getattr(torch.cpu, name) for name in dir(torch.cpu) if not name.startswith("__")})
    stand_ins = {
        "memory_reserved": zero,
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "max_memory_reserved": zero,
        "empty_cache": nothing,
        "ipc_collect": nothing,
        "reset_peak_memory_stats": nothing,
        "set_per_process_memory_fraction": nothing,
        "mem_get_info": mem_get_info,
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
        "get_rng_state": lambda *_, **__: torch.get_rng_state(),
        "set_rng_state": lambda state, *_, **__: torch.set_rng_state(state),
        "get_device_name": lambda *_, **__: "cpu",
    }
    for name, fn in stand_ins.items():
        if not hasattr(module, name):
            setattr(module, name, fn)
    return module


def _register_platform() -> None:
    # VERL 0.9 resolves its device (name, torch module, collective backend, Ray resource) through a platform registry
    # with CUDA, NPU and ROCm only; with none of them present it falls back to "nvidia", i.e. device "cuda", and every
    # .to(get_device_name()) fails. PlatformRegistry.register (VERL's public hook) plus set_platform: a CPU platform,
    # gloo as the backend, the device module above.
    from verl.plugin.platform import platform_manager
    from verl.plugin.platform.platform_base import PlatformBase

    @platform_manager.PlatformRegistry.register(platform=CPU_PLATFORM)
    class CpuPlatform(PlatformBase):
        device_module = _cpu_device_module()
        device_name = "cpu"
        vendor_name = "cpu"

        def is_available(self) -> bool:
            return True

        def current_device(self) -> int:
            # VERL places tensors with .to(get_device_id()); an int there means an accelerator. torch.cpu's own
            # current_device() is the string "cpu", which VERL 0.8 used as it is.
            return torch.cpu.current_device()

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextmanager
        def nvtx_range(self, msg: str) -> Any:
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "CPU"

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None

    platform_manager.set_platform(CpuPlatform())


def _register_engines() -> None:
    # VERL registers its FSDP engines for devices cuda and npu only ("No engine registered for device='cpu'" in
    # EngineRegistry); the same classes run on CPU. EngineRegistry.register is VERL's public hook.
    # The language-model engine is VERL's with logits at response positions only (cpu_engine.py).
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithValueHead

    from agl_bridge.verl.cpu_engine import CpuLMHeadEngine

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(CpuLMHeadEngine)
    EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device="cpu")(FSDPEngineWithValueHead)


def _register_rollout() -> None:
    # Trainer side: RolloutReplicaRegistry.register is public. Worker side: verl/workers/rollout/base.py resolves the
    # worker's rollout class from the private _ROLLOUT_REGISTRY only (still no public register function in 0.9.1).
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    def load() -> type:
        from agl_bridge.verl.cpu_rollout import CpuPolicyReplica

        return CpuPolicyReplica

    RolloutReplicaRegistry.register(CPU_ROLLOUT, load)
    base._ROLLOUT_REGISTRY[(CPU_ROLLOUT, "async")] = "agl_bridge.verl.cpu_rollout.CpuRolloutAdapter"


def _patch_unpinned_offload() -> None:
    # FSDP2's forward-only models (the reference policy when KL is on) get CPUOffloadPolicy(pin_memory=True); pinning
    # needs an accelerator. On CPU the parameters are where they would be offloaded to: the same policy, unpinned.
    from verl.workers.engine.fsdp import transformer_impl

    base = transformer_impl.CPUOffloadPolicy
    if base is None or getattr(base, "_agl_unpinned", False):
        return

    @dataclasses.dataclass
    class UnpinnedCPUOffloadPolicy(base):  # type: ignore[misc, valid-type]  # base is found at run time
        _agl_unpinned = True

        def __post_init__(self) -> None:
            self.pin_memory = False

    transformer_impl.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def _patch_row_loop_log_probs() -> None:
    # Without flash-attn's cross-entropy kernel, VERL's logprobs_from_logits falls back to logprobs_from_logits_v2,
    # which loops over the rows (one logsumexp per token, to bound GPU memory with a large vocabulary): on CPU a
    # step's ~1300 tokens are ~1300 small ops forward and backward, 50 ms of each update for this tiny model against
    # under 1 ms vectorized (same values). The FSDP engine's module-level name is the one its forward calls.
    from verl.workers.engine.fsdp import transformer_impl

    from agl_bridge.local.logits import log_probs_of

    def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True) -> torch.Tensor:
        return log_probs_of(logits, labels)

    transformer_impl.logprobs_from_logits = logprobs_from_logits


def cpu_actor_rollout_worker() -> type:
    """VERL's ``ActorRolloutRefWorker`` whose process group is gloo only.

    VERL's ``initialize_global_process_group_ray`` builds the backend ``"cpu:gloo,<device>:<backend>"``, which on CPU
    is ``"cpu:gloo,cpu:gloo"`` ("Duplicate device type cpu"). Initializing the group with ``gloo`` first, before
    VERL's ``init_model`` builds its engines, makes VERL's own call a no-op (it only initializes when no group
    exists)."""
    from verl.single_controller.base.decorator import Dispatch, register
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.workers.engine_workers import ActorRolloutRefWorker

    class CpuActorRolloutRefWorker(ActorRolloutRefWorker):
        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def init_model(self) -> None:
            install()
            initialize_global_process_group_ray(backend="gloo")
            super().init_model()

    return CpuActorRolloutRefWorker


def cpu_resource_pool_manager(resource_pool_spec: dict[str, list[int]], mapping: dict[Any, str]) -> Any:
    """VERL's ``ResourcePoolManager`` with CPU bundles: VERL's creates every pool with ``use_gpu=True`` and checks
    that Ray has as many GPUs as ``n_gpus_per_node × nnodes``. Here each of those counts one CPU worker process (Ray
    needs ``max_colocate_count`` logical CPUs per bundle: ``ray_init.num_cpus`` gives enough)."""
    from verl.single_controller.ray.base import RayResourcePool, ResourcePoolManager

    @dataclasses.dataclass
    class CpuResourcePoolManager(ResourcePoolManager):
        def create_resource_pool(self) -> None:
            for name, process_on_nodes in self.resource_pool_spec.items():
                self.resource_pool_dict[name] = RayResourcePool(
                    process_on_nodes=process_on_nodes,
                    use_gpu=False,
                    max_colocate_count=self.max_colocate_count,
                    name_prefix=name,
                )

    return CpuResourcePoolManager(resource_pool_spec=resource_pool_spec, mapping=mapping)


# Ray processes import this module through VERL_USE_EXTERNAL_MODULES / model.external_lib: register on import.
install()

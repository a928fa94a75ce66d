"""VERL's own trainer on CPU: the registrations and the few patches VERL 0.8.0 needs to run its ``RayPPOTrainer``
machinery (FSDP2 actor on gloo, its log-prob and update code, weight push to a rollout replica) without a GPU.

This module is VERL's plugin: the CPU config (``config/agl_device/cpu.yaml``) names it in ``VERL_USE_EXTERNAL_MODULES``
(Ray's ``runtime_env``, read by ``verl/__init__.py`` in every Ray process) and in ``actor_rollout_ref.model.
external_lib``, so importing it registers everything everywhere. Nothing happens when a GPU is present: there the
trainer runs exactly as on VERL's GPU path (``scripts/gpu-smoke.sh``).

Each patch names the VERL limitation it covers. What is not a patch — a resource pool without GPUs, the gloo process
group, the trainer's worker classes — is a subclass, wired by ``AglTaskRunner`` (``trainer.py``).
"""

from __future__ import annotations

import dataclasses
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
    _register_engines()
    _register_rollout()
    _patch_cpu_memory_api()
    _patch_attention_utils()
    _patch_unpinned_offload()


def _register_engines() -> None:
    # VERL registers its FSDP engines for devices cuda and npu only ("Unknown device: cpu" in EngineRegistry); the
    # same classes run on CPU. EngineRegistry.register is VERL's public hook.
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(FSDPEngineWithLMHead)
    EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device="cpu")(FSDPEngineWithValueHead)


def _register_rollout() -> None:
    # Trainer side: RolloutReplicaRegistry.register is public. Worker side: verl/workers/rollout/base.py resolves the
    # worker's rollout class from the private _ROLLOUT_REGISTRY only (no public register function in 0.8.0).
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    def load() -> type:
        from agl_bridge.verl.cpu_rollout import CpuPolicyReplica

        return CpuPolicyReplica

    RolloutReplicaRegistry.register(CPU_ROLLOUT, load)
    base._ROLLOUT_REGISTRY[(CPU_ROLLOUT, "async")] = "agl_bridge.verl.cpu_rollout.CpuRolloutAdapter"


def _patch_cpu_memory_api() -> None:
    # VERL calls its device module's allocator functions (get_torch_device().memory_reserved(), empty_cache(),
    # mem_get_info(), ... in aggressive_empty_cache, log_gpu_memory_usage and the workers' perf metrics); torch.cpu
    # has none of them. CPU memory has no caching allocator to report or empty: zeros and no-ops, and the machine's
    # memory for mem_get_info.
    import psutil

    def zero(*_: Any, **__: Any) -> int:
        return 0

    def nothing(*_: Any, **__: Any) -> None:
        return None

    def mem_get_info(*_: Any, **__: Any) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return int(memory.available), int(memory.total)

    defaults = {
        "memory_reserved": zero,
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "max_memory_reserved": zero,
        "empty_cache": nothing,
        "reset_peak_memory_stats": nothing,
        "mem_get_info": mem_get_info,
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
    }
    for name, fn in defaults.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, fn)


def _patch_attention_utils() -> None:
    # verl.utils.attention_utils (unpad_input, index_first_axis, used by left_right_2_no_padding for every log-prob and
    # update batch) imports flash_attn.bert_padding unless on NPU; flash-attn is CUDA-only. VERL ships a pure-torch
    # version of the same four functions (verl.utils.npu_flash_attn_utils, needs einops): use it.
    from verl.utils import attention_utils, npu_flash_attn_utils

    def torch_attention_functions() -> tuple[Any, Any, Any, Any]:
        fns = (
            npu_flash_attn_utils.index_first_axis,
            npu_flash_attn_utils.pad_input,
            npu_flash_attn_utils.rearrange,
            npu_flash_attn_utils.unpad_input,
        )
        attention_utils._index_first_axis, attention_utils._pad_input = fns[0], fns[1]
        attention_utils._rearrange, attention_utils._unpad_input = fns[2], fns[3]
        return fns

    attention_utils._get_attention_functions = torch_attention_functions


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


def cpu_actor_rollout_worker() -> type:
    """VERL's ``ActorRolloutRefWorker`` whose process group is gloo only.

    VERL's ``initialize_global_process_group_ray`` builds the backend ``"cpu:gloo,<device>:nccl"``, which on CPU is
    ``"cpu:gloo,cpu:nccl"`` ("Duplicate device type cpu"). Initializing the group with ``gloo`` first, before VERL's
    ``init_model`` builds its engines, makes VERL's own call a no-op (it only initializes when no group exists)."""
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

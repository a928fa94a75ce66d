"""Composes the trainer's Hydra config (VERL's ``ppo_trainer`` + ``agl_trainer.yaml``, + ``agl_device/cpu.yaml`` on
CPU) without running Hydra's app."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

__all__ = ["CONFIG_DIR", "compose_config", "device_overrides"]

CONFIG_DIR = Path(__file__).resolve().parent / "config"


def device_overrides(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with ``agl_device=cpu`` added when they say ``trainer.device=cpu``, or name neither a device nor
    an ``agl_device`` and there is no CUDA device here. On GPU nothing is added: VERL's defaults."""
    if any(o.lstrip("+").startswith("agl_device=") for o in overrides):
        return list(overrides)
    device = next((o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("trainer.device=")), None)
    if device is None:
        import torch

        cpu = not torch.cuda.is_available()
    else:
        cpu = device == "cpu"
    return ["agl_device=cpu", *overrides] if cpu else list(overrides)


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The full config, with Hydra command-line style ``overrides`` (``agl.store=http://...``, ``agl_device=cpu``)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="agl_trainer", overrides=list(overrides))

"""Composes the trainer's Hydra config (VERL's ``ppo_trainer`` + ``agl_trainer.yaml``) without running Hydra's app."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

__all__ = ["CONFIG_DIR", "compose_config"]

CONFIG_DIR = Path(__file__).resolve().parent / "config"


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The full config, with Hydra command-line style ``overrides`` (``agl.store=http://...``)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="agl_trainer", overrides=list(overrides))

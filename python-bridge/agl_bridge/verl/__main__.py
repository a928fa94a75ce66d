"""``python -m agl_bridge.verl [hydra overrides]``: VERL's PPO trainer on the agl store.

    python -m agl_bridge.verl agl.store=http://store:4747 agl.proxy=http://proxy:4748/v1 \\
        agl.train_dataset=tasks.jsonl actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\
        data.train_files=prompts.parquet data.val_files=prompts.parquet trainer.total_training_steps=2 \\
        agl.val_dataset=val.jsonl trainer.test_freq=1   # validate before training and after every step

Without a CUDA device (or with ``trainer.device=cpu``) ``agl_device=cpu`` is added: the same trainer on CPU (FSDP2 on
gloo, agl's CPU rollout replica; ``config/agl_device/cpu.yaml``).
"""

from __future__ import annotations

import sys

import hydra
import ray
from omegaconf import DictConfig

from agl_bridge.log import configure_logging
from agl_bridge.verl.compose import CONFIG_DIR, device_overrides


@hydra.main(config_path=str(CONFIG_DIR), config_name="agl_trainer", version_base=None)
def main(config: DictConfig) -> None:
    from verl.trainer.main_ppo import run_ppo

    from agl_bridge.verl.trainer import AglTaskRunner

    configure_logging()
    run_ppo(config, task_runner_class=ray.remote(num_cpus=1)(AglTaskRunner))


if __name__ == "__main__":
    sys.argv[1:] = device_overrides(sys.argv[1:])
    main()

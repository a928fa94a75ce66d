"""The demo task (``examples/rl-kind/agent.ts``: "kind of fox ?") as files for VERL's trainer: the tiny model of
``make demo`` saved as a Hugging Face directory (``actor_rollout_ref.model.path``), training and validation tasks
(``agl.train_dataset``, ``agl.val_dataset``) and the prompt Parquet VERL's ``TaskRunner`` loads (the agl loop does
not read it: rollouts come from the store).

    python -m agl_bridge.verl.kind_files DIR [--seed 0] [--warmup-steps 300]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["KindFiles", "write_kind_files"]


class KindFiles:
    """Where ``write_kind_files`` put each file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.model = root / "model"
        self.train = root / "tasks.jsonl"
        self.val = root / "val.jsonl"
        self.prompts = root / "prompts.parquet"

    def overrides(self) -> list[str]:
        """The trainer's Hydra overrides naming these files."""
        return [
            f"actor_rollout_ref.model.path={self.model}",
            f"agl.train_dataset={self.train}",
            f"agl.val_dataset={self.val}",
            f"data.train_files={self.prompts}",
            f"data.val_files={self.prompts}",
        ]


def write_kind_files(root: str | Path, *, seed: int = 0, warmup_steps: int = 300, val_tasks: int = 16) -> KindFiles:
    """The local trainer's model for the task (same build, same format-only warm-up, same seeds), saved with its
    tokenizer; 4096 training tasks and ``val_tasks`` validation tasks drawn with other seeds."""
    import pandas as pd
    import torch

    from agl_bridge.local import tasks
    from agl_bridge.local.run import LocalTrainerOptions, build_policy

    torch.set_num_threads(1)  # a tiny model: more threads only contend
    files = KindFiles(Path(root))
    files.root.mkdir(parents=True, exist_ok=True)
    policy = build_policy(LocalTrainerOptions(store="", seed=seed, warmup_steps=warmup_steps))
    policy.model.save_pretrained(files.model)
    policy.tokenizer.save_pretrained(files.model)
    policy.close()
    train = tasks.make_tasks(4096, seed=seed + 7)
    files.train.write_text("".join(json.dumps(t) + "\n" for t in train))
    files.val.write_text("".join(json.dumps(t) + "\n" for t in tasks.make_tasks(val_tasks, seed=seed + 13)))
    pd.DataFrame(
        {
            "prompt": [[{"role": "user", "content": tasks.format_prompt(t)}] for t in train[:64]],
            "data_source": "agl-kind",
            "reward_model": [{"ground_truth": tasks.expected_answer(t)} for t in train[:64]],
        }
    ).to_parquet(files.prompts)
    return files


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m agl_bridge.verl.kind_files", description=__doc__)
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--val-tasks", type=int, default=16)
    a = p.parse_args()
    files = write_kind_files(a.dir, seed=a.seed, warmup_steps=a.warmup_steps, val_tasks=a.val_tasks)
    print(" ".join(files.overrides()))


if __name__ == "__main__":
    main()

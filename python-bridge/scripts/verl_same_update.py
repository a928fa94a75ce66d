"""Whether VERL's actor update is the local trainer's: the same rows, from the same weights, through both.

Each step samples 8 tasks x 16 rollouts of the demo task from the local policy (seeded), computes agl's GRPO
advantages, then updates (a) the local trainer's ``Policy.update_sync`` and (b) VERL 0.9's own actor worker —
``ActorRolloutRefWorker`` with its FSDP2 engine, ``ppo_loss`` and optimizer, in this process (world size 1, gloo), fed
the rows in the TransferQueue layout ``VerlBackend`` writes, in VERL's bypass mode as ``make demo-verl`` runs it —
and compares the two weight changes and gradient norms (``--own-old-log-probs``: the rows sent without old log-probs,
as ``VerlBackend`` sends an on-policy update on CPU, where agl's CPU engine takes the update's own). Prints one line
per step; exits 1 when the relative difference of the accumulated weight changes exceeds ``--tolerance``.

    PYTHONPATH=python-bridge python-bridge/.venv/bin/python python-bridge/scripts/verl_same_update.py [--steps 3]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from typing import Any

import numpy as np
import torch


def _verl_worker(model_dir: str, lr: float, rows: int, kl: float) -> Any:
    from agl_bridge.verl import compose_config, cpu

    config = compose_config(
        [
            "agl_device=cpu",
            f"actor_rollout_ref.model.path={model_dir}",
            f"actor_rollout_ref.rollout.n={rows}",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            f"actor_rollout_ref.actor.optim.lr={lr}",
            "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
            "actor_rollout_ref.actor.optim.weight_decay=0",
            "actor_rollout_ref.actor.optim.total_training_steps=100",
            f"actor_rollout_ref.actor.use_kl_loss={str(kl > 0).lower()}",
            f"actor_rollout_ref.actor.kl_loss_coef={kl}",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
            "actor_rollout_ref.actor.entropy_coeff=0",
        ]
    )
    worker = cpu.cpu_actor_rollout_worker()(config.actor_rollout_ref, role="actor")
    worker.init_model()
    return worker


def _verl_update(worker: Any, data: Any, step: int, own_old: bool) -> float:
    """``_update_actor``'s call, as a worker receives it: the rows' fields and the trainer's extra info."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import response_to_nested

    from agl_bridge.verl.tq_batch import to_samples

    shaped = copy.deepcopy(data)
    if not own_old:
        shaped.batch["old_log_probs"] = shaped.batch["rollout_log_probs"].clone()  # VERL's bypass mode, as VerlBackend
    _, fields, _ = to_samples(shaped, step)
    if "ref_log_prob" in data.batch.keys():  # as VERL's _compute_ref_log_prob writes it
        fields["ref_log_prob"] = response_to_nested(data.batch["ref_log_prob"], fields["response_mask"])
    extra = {
        "calculate_entropy": False,
        "distillation_use_topk": False,
        "distillation_only": False,
        "global_batch_size": len(data),
        "mini_batch_size": len(data),
        "epochs": 1,
        "seed": 0,
        "dataloader_kwargs": {"shuffle": False},
        "temperature": 1.0,
    }
    for key, value in extra.items():
        tu.assign_non_tensor_data(fields, key, value)
    metrics = tu.get(worker.actor.train_mini_batch(fields), "metrics")
    return float(np.ravel(metrics["grad_norm"])[0])


def _verl_weights(worker: Any) -> dict[str, torch.Tensor]:
    state = worker.actor.engine.module.state_dict()
    return {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone() for k, v in state.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=7e-4)
    p.add_argument("--no-std", action="store_true", help="GRPO advantages without the group's std")
    p.add_argument("--kl", type=float, default=0.0, help="KL loss coefficient (the reference: the starting weights)")
    p.add_argument("--own-old-log-probs", action="store_true", help="rows without old log-probs (on-policy on CPU)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest relative difference of the weight changes")
    a = p.parse_args()
    # One FSDP rank in this process, on gloo, with agl's CPU platform: what cpu.yaml gives VERL's Ray workers.
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    os.environ.update(VERL_PLATFORM="cpu", VERL_USE_EXTERNAL_MODULES="agl_bridge.verl.cpu")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.set_num_threads(1)
    from agl_bridge.local import tasks as kind
    from agl_bridge.local.kind_batch import kind_batch
    from agl_bridge.local.model import load_model
    from agl_bridge.local.policy import GrpoConfig, Policy
    from agl_bridge.verl.kind_files import write_kind_files

    files = write_kind_files(tempfile.mkdtemp(prefix="agl-verl-same-update-"), seed=a.seed, warmup_steps=100)
    model, tokenizer = load_model(str(files.model))
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    local = Policy(model, tokenizer, GrpoConfig(lr=a.lr, kl_coef=a.kl), sampling_seed=a.seed)
    local.set_reference()
    tasks = kind.make_tasks(8 * a.steps, seed=a.seed + 7)
    worker = _verl_worker(str(files.model), a.lr, 8 * 16, a.kl)
    worst = 0.0
    for step in range(a.steps):
        data, _ = kind_batch(local, tasks[8 * step : 8 * step + 8], 16, norm_adv_by_std=not a.no_std)
        if a.kl > 0:  # what VERL's _compute_ref_log_prob adds to the rows (the reference model's forward pass)
            with torch.no_grad():
                ref = local.response_log_probs(data, local.reference)
            data.batch["ref_log_prob"] = ref * data.batch["response_mask"]
        verl_norm = _verl_update(worker, data, step + 1, a.own_old_log_probs)
        local_norm = local.update_sync(copy.deepcopy(data))["actor/grad_norm"]
        served, trained = local.model.state_dict(), _verl_weights(worker)
        d_local = torch.cat([(served[k] - start[k]).flatten() for k in start])
        d_verl = torch.cat([(trained[k] - start[k]).flatten() for k in start])
        relative = float((d_verl - d_local).norm() / d_local.norm())
        worst = max(worst, relative)
        reward = float(data.batch["token_level_scores"].sum(-1).mean())
        print(
            f"step {step + 1}: reward {reward:.3f}  grad norm local {local_norm:.6f} VERL {verl_norm:.6f}  "
            f"|weight change| {float(d_local.norm()):.4e}, VERL - local {float((d_verl - d_local).norm()):.2e} "
            f"({relative:.1e} of it)",
            flush=True,
        )
    torch.distributed.destroy_process_group()
    ok = worst <= a.tolerance
    print(f"verl-same-update: {'same' if ok else 'DIFFERENT'} update (largest relative difference {worst:.1e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

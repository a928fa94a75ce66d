"""``python -m agl_bridge.local``: the local CPU trainer (policy server + GRPO with VERL's functions)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import warnings

# Quiet third-party import chatter (ray, verl's NPU notes, transformers progress bars) in a command-line run.
warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers.utils import logging as hf_logging  # noqa: E402

from agl_bridge.local.run import LocalTrainerOptions, run_local_trainer, write_summary  # noqa: E402
from agl_bridge.training.empty_steps import TrainingAborted  # noqa: E402

hf_logging.disable_progress_bar()


def parse_args(argv: list[str] | None = None) -> LocalTrainerOptions:
    p = argparse.ArgumentParser(prog="python -m agl_bridge.local", description=__doc__)
    p.add_argument("--store", required=True, help="store address, http://HOST:PORT")
    p.add_argument("--token", default=None, help="store token (or AGL_TOKEN)")
    p.add_argument("--proxy", default=None, help="agl LLM proxy URL to publish as the agents' LLM (proxy_llm)")
    p.add_argument("--model", default=None, help="directory of a Hugging Face causal LM (default: build a tiny one)")
    p.add_argument("--task", default="kind", help="built-in dataset when --dataset is not given: 'kind' (the demo)")
    p.add_argument("--dataset", default=None, help="JSONL file of task inputs (needs --model)")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--n", type=int, default=8, help="rollouts per task (one GRPO group)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ppo-epochs", type=int, default=1)
    p.add_argument("--mini-batch", type=int, default=None)
    p.add_argument("--warmup-steps", type=int, default=300, help="supervised format warm-up of a new tiny model")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=8, help="max_tokens published with the LLM resource")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--host", default="127.0.0.1", help="policy server host")
    p.add_argument("--port", type=int, default=0, help="policy server port (0: any)")
    p.add_argument("--model-name", default="agl-local-policy")
    p.add_argument("--resources-id", default="agl-policy")
    p.add_argument("--llm-name", default="main_llm")
    p.add_argument("--rollout-timeout", type=float, default=300.0, help="seconds to wait for a step's rollouts")
    p.add_argument("--attempt-timeout", type=float, default=120.0, help="watchdog timeout of one attempt (retried)")
    p.add_argument(
        "--python-agents",
        type=int,
        default=0,
        help="also run N in-process Python agents for the built-in task (no TS runner needed)",
    )
    p.add_argument("--val-dataset", default=None, help="JSONL file of validation tasks (rollouts of mode val)")
    p.add_argument("--val-tasks", type=int, default=0, help="validate on N tasks of the built-in task")
    p.add_argument(
        "--test-freq", type=int, default=10, help="validate every K steps and after the last (0: only before training)"
    )
    p.add_argument(
        "--no-val-before-train", dest="val_before_train", action="store_false", help="skip validation before step 1"
    )
    p.add_argument("--val-n", type=int, default=1, help="validation rollouts per task")
    p.add_argument("--val-temperature", type=float, default=None, help="validation temperature (default: training's)")
    p.add_argument(
        "--summary",
        default=None,
        help="write a JSON summary (reward per step, versions) here, and the reward curve beside it (NAME-rewards.png)",
    )
    p.add_argument("--target", type=float, default=None, help="a target reward to draw on the reward curve")
    p.add_argument(
        "--max-staleness",
        type=int,
        default=0,
        help="asynchronous training: runners work ahead while a step trains, on calls at most N updates stale "
        "(0: synchronous)",
    )
    p.add_argument(
        "--rollout-is",
        choices=["token", "sequence", "off"],
        default=None,
        help="off-policy correction with the engine's log-probs (VERL's truncated IS; default: token when "
        "--max-staleness > 0, else off)",
    )
    p.add_argument("--rollout-is-threshold", type=float, default=2.0, help="upper bound of the importance weights")
    p.add_argument("--dtype", default=None, help="float32 (default) or bfloat16; float16 is refused")
    p.add_argument("--chat-template", default=None, help="a Jinja chat template file, for a base model's chat calls")
    p.add_argument("--micro-batch", type=int, default=8, help="rows per forward/backward pass of the update")
    p.add_argument("--freeze-embeddings", action="store_true", help="leave the (tied) embeddings untrained")
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient norm clipping")
    p.add_argument("--max-prompt-length", type=int, default=1024, help="longer prompts are not trained on")
    p.add_argument("--max-batch", type=int, default=32, help="requests the policy server samples in one batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    a = p.parse_args(argv)
    return LocalTrainerOptions(**{k: v for k, v in vars(a).items()})


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    loop = asyncio.new_event_loop()
    task = loop.create_task(run_local_trainer(options))
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    started = time.time()
    try:
        summary = loop.run_until_complete(task)
    except asyncio.CancelledError:
        print("[agl] stopped; the next start resumes from the last checkpoint", file=sys.stderr, flush=True)
        return 130
    except TrainingAborted as error:
        print(f"[agl] training stopped: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        loop.close()
    if options.summary:
        png = write_summary(options, {**summary, "wall_s": time.time() - started})
        if png is not None:
            print(f"[agl] reward curve: {png}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

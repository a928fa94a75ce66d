"""``python -m agl_bridge.local``: the local CPU trainer (policy server + GRPO with VERL's functions)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import warnings
from argparse import SUPPRESS
from functools import partial

# Quiet third-party import chatter (ray, verl's NPU notes, transformers progress bars) in a command-line run.
warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers.utils import logging as hf_logging  # noqa: E402

from agl_bridge.errors import AglError, ConfigError  # noqa: E402
from agl_bridge.local.run import LocalTrainerOptions, run_local_trainer, write_local_summary  # noqa: E402
from agl_bridge.log import configure_logging, get_logger  # noqa: E402
from agl_bridge.training.config import LoopConfig, loop_fields, parse_field  # noqa: E402

hf_logging.disable_progress_bar()
log = get_logger("local")


# Short names of loop settings, kept for the flags ``agl train`` and scripts pass (``--steps``).
_ALIASES = {"total_steps": ["--steps"]}


def _loop_arguments(p: argparse.ArgumentParser) -> None:
    """A flag per ``LoopConfig`` field, ``--field-name`` (booleans also ``--no-field-name``): the schema both trainers
    share, so that ``agl train ... -- --field-name value`` sets any of them."""
    group = p.add_argument_group("training loop (LoopConfig; the VERL trainer reads the same fields)")
    for f in loop_fields():
        flags = [f"--{f.name.replace('_', '-')}", *_ALIASES.get(f.name, [])]
        help_text = (
            f.metadata["help"] if "default" in f.metadata["help"] else f"{f.metadata['help']} (default {f.default})"
        )
        if f.type == "bool":
            group.add_argument(
                *flags, dest=f"loop.{f.name}", action=argparse.BooleanOptionalAction, default=SUPPRESS, help=help_text
            )
        else:
            group.add_argument(
                *flags,
                dest=f"loop.{f.name}",
                type=partial(parse_field, f),
                default=SUPPRESS,
                metavar=f.name.upper(),
                help=help_text,
            )


def parse_args(argv: list[str] | None = None) -> LocalTrainerOptions:
    p = argparse.ArgumentParser(prog="python -m agl_bridge.local", description=__doc__)
    p.add_argument("--store", required=True, help="store address, http://HOST:PORT")
    p.add_argument("--token", default=None, help="store token (or AGL_TOKEN)")
    p.add_argument("--proxy", default=None, help="agl LLM proxy URL to publish as the agents' LLM (proxy_llm)")
    p.add_argument("--model", default=None, help="a GGUF file or a causal LM directory (default: a tiny one)")
    p.add_argument("--task", default="kind", help="built-in dataset when --dataset is not given: 'kind' (the demo)")
    p.add_argument("--dataset", default=None, help="JSONL file of task inputs (needs --model)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ppo-epochs", type=int, default=1)
    p.add_argument("--mini-batch", type=int, default=None)
    p.add_argument("--warmup-steps", type=int, default=300, help="supervised format warm-up of a new tiny model")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=8, help="max_tokens published with the LLM resource")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--host", default="127.0.0.1", help="policy server host")
    p.add_argument("--port", type=int, default=0, help="policy server port (0: any)")
    p.add_argument("--advertise-host", default=None, help="host of the policy URL published into the store")
    p.add_argument("--tls-cert", default=None, help="serve the policy over TLS: PEM certificate chain")
    p.add_argument("--tls-key", default=None, help="its PEM private key")
    p.add_argument("--tls-client-ca", default=None, help="mutual TLS: require client certificates of this CA")
    p.add_argument("--ca-file", default=None, help="verify an https store against this CA (or AGL_CA_FILE)")
    p.add_argument("--model-name", default="agl-local-policy")
    p.add_argument(
        "--python-agents",
        type=int,
        default=0,
        help="also run N in-process Python agents for the built-in task (no TS runner needed)",
    )
    p.add_argument("--val-dataset", default=None, help="JSONL file of validation tasks (rollouts of mode val)")
    p.add_argument("--val-tasks", type=int, default=0, help="validate on N tasks of the built-in task")
    p.add_argument(
        "--val-temperature", type=float, default=None, help="validation temperature (short for --val-sampling)"
    )
    p.add_argument(
        "--summary",
        default=None,
        help="write a JSON summary (reward per step, versions) here, and the reward curve beside it (NAME-rewards.png)",
    )
    p.add_argument("--target", type=float, default=None, help="a target reward to draw on the reward curve")
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
    p.add_argument("--max-batch", type=int, default=32, help="requests the policy server samples in one batch")
    p.add_argument(
        "--kl-coef",
        type=float,
        default=0.0,
        help="KL loss coefficient against the weights RL started from (VERL's actor.kl_loss_coef; 0: none)",
    )
    p.add_argument("--kl-type", default="low_var_kl", help="VERL's KL estimator (actor.kl_loss_type)")
    p.add_argument(
        "--betas",
        type=float,
        nargs=2,
        default=(0.9, 0.999),
        metavar=("BETA1", "BETA2"),
        help="AdamW's betas (VERL's actor.optim.betas)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    _loop_arguments(p)
    values = vars(p.parse_args(argv))
    values["betas"] = tuple(values["betas"])
    if not all(0.0 <= beta < 1.0 for beta in values["betas"]):
        p.error(f"--betas: each beta must be in [0, 1), got {values['betas'][0]} {values['betas'][1]}")
    loop = {k.removeprefix("loop."): values.pop(k) for k in list(values) if k.startswith("loop.")}
    val_temperature = values.pop("val_temperature")
    if val_temperature is not None:
        loop["val_sampling"] = {**(loop.get("val_sampling") or {}), "temperature": val_temperature}
    try:
        return LocalTrainerOptions(loop=LoopConfig(**loop), **values)
    except ConfigError as error:
        p.error(str(error))


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    options = parse_args(argv)
    loop = asyncio.new_event_loop()
    task = loop.create_task(run_local_trainer(options))
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    started = time.time()
    try:
        summary = loop.run_until_complete(task)
    except asyncio.CancelledError:
        log.info("stopped; the next start resumes from the last checkpoint")
        return 130
    except AglError as error:
        log.error("%s", error)
        return 1
    finally:
        loop.close()
    write_local_summary(options, {**summary, "wall_s": time.time() - started})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One schema (``LoopConfig``) for both trainers: every field is settable from ``agl train`` for the local trainer (its
``--field-name`` flags) and for the VERL trainer (VERL's key, or ``agl.<field>``), and both read the same defaults.

``agl train`` is run for real (store, proxy and runner pool started by it), with ``--python`` a recorder of the
trainer's command line, which is then read by the trainers' own parsers."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from conftest import REPO_ROOT  # noqa: E402

from agl_bridge.errors import ConfigError  # noqa: E402
from agl_bridge.local.__main__ import parse_args  # noqa: E402
from agl_bridge.local.run import build_policy  # noqa: E402
from agl_bridge.training.config import LoopConfig, loop_fields  # noqa: E402
from agl_bridge.verl import compose_config  # noqa: E402
from agl_bridge.verl.settings import loop_config  # noqa: E402

AGENT = REPO_ROOT / "examples" / "rl-kind" / "agent.ts"
# The flags `agl train` itself turns into trainer arguments (--steps, --n, --tasks-per-step, --checkpoint-dir).
OWN_FLAGS = {"total_steps": 3, "n": 2, "tasks_per_step": 5}


def _other_value(f: dataclasses.Field[Any]) -> Any:
    """A value of field ``f`` that is not its default."""
    kind, default = str(f.type).split(" ")[0], cast(Any, f.default)
    if f.name == "triplet_options":
        return {"mode": "TRIPLET_MODE_TRAJECTORY"}
    if f.name == "val_sampling":
        return {"temperature": 0.5}
    if f.name == "prompt_templates":
        return {"word_math": "examples/word-math/prompts/seven-shot.txt"}
    if kind == "bool":
        return not default
    if kind == "int":
        return (default or 0) + 3
    if kind == "float":
        return (default or 0.0) + 1.5
    if kind == "str":
        return f"x-{f.name}"
    raise AssertionError(f"no test value for {f.name}: {f.type}")


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _local_flags(checkpoint_dir: Path) -> tuple[list[str], dict[str, Any]]:
    """Trainer arguments (after ``--``) setting every field ``agl train`` does not, and the values expected."""
    argv: list[str] = []
    expected: dict[str, Any] = {"checkpoint_dir": str(checkpoint_dir), **OWN_FLAGS}
    for f in loop_fields():
        if f.name in expected:
            continue
        value = _other_value(f)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(value, bool):
            argv.append(flag if value else f"--no-{f.name.replace('_', '-')}")
        else:
            argv += [flag, _text(value)]
        expected[f.name] = value
    return argv, expected


def _verl_overrides(checkpoint_dir: Path) -> tuple[list[str], dict[str, Any]]:
    """Hydra overrides (after ``--``) setting every field ``agl train`` does not, and the values expected."""
    overrides: list[str] = []
    expected: dict[str, Any] = {"checkpoint_dir": f"{checkpoint_dir}/agl", **OWN_FLAGS}
    for f in loop_fields():
        if f.name in expected:
            continue
        key, value = f.metadata["verl"], _other_value(f)
        if f.name == "resume":
            overrides.append("trainer.resume_mode=disable")
        elif f.name == "val_sampling":
            overrides += [f"{key}.do_sample=true", f"{key}.temperature=0.5"]
        elif isinstance(value, dict):
            overrides.append(f"{key or 'agl.' + f.name}={{{','.join(f'{k}:{v}' for k, v in value.items())}}}")
        else:
            overrides.append(f"{key or 'agl.' + f.name}={_text(value)}")
        expected[f.name] = value
    return overrides, expected


def _agl_train(tmp_path: Path, trainer: str, trainer_args: list[str]) -> list[str]:
    """Runs ``agl train`` with a ``--python`` that records its arguments; returns the trainer's arguments."""
    recorder, argv_file = tmp_path / "python", tmp_path / "argv.json"
    recorder.write_text('#!/bin/sh\nprintf "%s\\0" "$@" > "$AGL_TEST_ARGV"\n')
    recorder.chmod(0o755)
    (tmp_path / "tasks.jsonl").write_text('{"q": 1}\n')
    command = ["node", str(REPO_ROOT / "bin" / "agl.js"), "train", str(AGENT), "--trainer", trainer]
    command += ["--database", str(tmp_path / "agl.db"), "--dataset", str(tmp_path / "tasks.jsonl")]
    command += ["--steps", "3", "--n", "2", "--tasks-per-step", "5", "--checkpoint-dir", str(tmp_path / "ck")]
    command += ["--python", str(recorder), "--", *trainer_args]
    env = {**{k: v for k, v in os.environ.items() if k != "AGL_TOKEN"}, "AGL_TEST_ARGV": str(argv_file)}
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return argv_file.read_text().split("\0")[:-1]


def test_every_field_is_settable_from_agl_train_for_the_local_trainer(tmp_path):
    flags, expected = _local_flags(tmp_path / "ck")
    argv = _agl_train(tmp_path, "local", flags)
    assert argv[:2] == ["-m", "agl_bridge.local"]
    config = parse_args(argv[2:]).loop
    assert {f.name for f in loop_fields()} == set(expected)
    assert {name: getattr(config, name) for name in expected} == expected


def test_every_field_is_settable_from_agl_train_for_the_verl_trainer(tmp_path):
    overrides, expected = _verl_overrides(tmp_path / "ck")
    argv = _agl_train(tmp_path, "verl", overrides)
    assert argv[:2] == ["-m", "agl_bridge.verl"]
    config = loop_config(compose_config(argv[2:]))
    assert {f.name for f in loop_fields()} == set(expected)
    assert {name: getattr(config, name) for name in expected} == expected


def test_both_trainers_have_the_loops_defaults():
    """Nothing given: the local trainer's settings are ``LoopConfig()``'s, and so are the VERL trainer's for every
    field VERL has no key of its own for (``agl.*`` is null in the shipped config)."""
    defaults = LoopConfig()
    assert parse_args(["--store", "http://127.0.0.1:1"]).loop == defaults
    verl = loop_config(compose_config([]))
    for f in loop_fields():
        if f.metadata["verl"] is None:
            assert getattr(verl, f.name) == getattr(defaults, f.name), f.name
    assert verl.rollout_timeout == defaults.rollout_timeout == 600.0


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="max_staleness"):
        LoopConfig(max_staleness=-1)
    with pytest.raises(ConfigError, match="val_n"):
        loop_config(compose_config(["actor_rollout_ref.rollout.val_kwargs.n=0"]))
    with pytest.raises(SystemExit):  # argparse's usage error, from the entry point's parser
        parse_args(["--store", "x", "--max-attempts", "many"])
    with pytest.raises(SystemExit):
        parse_args(["--store", "x", "--betas", "0.9", "1.0"])


def test_the_local_trainers_adam_betas_reach_its_optimizer():
    """``--betas`` is VERL's ``actor.optim.betas`` for the local trainer (the demo's optimizer studies turn it)."""
    options = parse_args(["--store", "x", "--betas", "0.5", "0.99", "--warmup-steps", "0"])
    assert options.betas == (0.5, 0.99)
    policy = build_policy(options)
    try:
        assert policy.optimizer.param_groups[0]["betas"] == (0.5, 0.99)
    finally:
        policy.close()
    assert parse_args(["--store", "x"]).betas == (0.9, 0.999)

"""The demos' pass rule lives in one place (``agl_bridge.training.demo_rule``), and ``make demo``, ``make demo-verl``
and ``make demo-seeds`` all apply it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from agl_bridge.training.demo_rule import FINAL_MIN, FIRST_MAX, judge, steps_to_target


def _summary(rewards: list[float]) -> dict[str, object]:
    tail = rewards[-5:]
    return {"rewards": rewards, "initial_reward": rewards[0], "final_reward": sum(tail) / len(tail), "timings": []}


@pytest.mark.parametrize(
    ("first", "final", "ok"),
    [(FIRST_MAX, FINAL_MIN, True), (FIRST_MAX + 0.01, 1.0, False), (0.0, FINAL_MIN - 0.01, False)],
)
def test_the_rule_bounds_first_and_final_reward(first: float, final: float, ok: bool) -> None:
    assert judge(_summary([first, *[final] * 5])).ok is ok


def test_the_wall_limit_applies_only_when_given() -> None:
    passing = _summary([0.1, 1, 1, 1, 1, 1])
    assert judge(passing, 400.0).ok
    assert not judge(passing, 400.0, wall_max_s=300.0).ok
    assert judge(passing, 299.0, wall_max_s=300.0).ok
    assert steps_to_target([0.1, 1, 1, 1, 1, 1]) == 6 and steps_to_target([0.1, 0.5]) is None


def _check(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agl_bridge.training.demo_rule", str(path), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_the_command_prints_the_line_and_exits_by_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(_summary([0.2, 0.95, 0.95, 0.95, 0.95, 0.95])))
    passed = _check(path, "--label", "agl demo", "--started", str(time.time() - 12))
    assert passed.returncode == 0, passed.stderr
    expected = r"agl demo: 6 steps, 1\d s in all; initial reward 0.200 \(target <= 0.3\), final 0.950"
    assert re.search(expected, passed.stdout), passed.stdout
    assert passed.stdout.rstrip().endswith(": reached")
    path.write_text(json.dumps(_summary([0.5, 0.95, 0.95, 0.95, 0.95, 0.95])))
    failed = _check(path, "--label", "agl demo-verl", "--plot")
    assert failed.returncode == 1 and "reward per step" in failed.stdout and "NOT reached" in failed.stdout


def test_every_demo_applies_this_rule(tmp_path: Path) -> None:
    scripts = REPO_ROOT / "python-bridge" / "scripts"
    for script in ("demo.sh", "demo-verl.sh"):
        text = (scripts / script).read_text()
        assert "-m agl_bridge.training.demo_rule" in text and "final_reward" not in text, script
    # make demo-seeds' report: a run that met the rewards but not the wall limit is a miss.
    run = tmp_path / "seed-0"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(_summary([0.1, 1, 1, 1, 1, 1])))
    report = [sys.executable, str(REPO_ROOT / "bench" / "demo-seeds" / "report.py")]
    slow = subprocess.run([*report, "line", "seed-0", str(run), str(time.time() - 301)], capture_output=True, text=True)
    assert slow.returncode == 0 and "MISSED" in slow.stdout, slow.stderr
    summary = subprocess.run([*report, "summary", str(tmp_path), "seed-0"], capture_output=True, text=True)
    assert summary.returncode == 1 and "0/1 runs met the rule" in summary.stdout

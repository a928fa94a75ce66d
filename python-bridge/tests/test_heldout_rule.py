"""``make demo-real``'s rule: a held-out gain of at least +0.15 whose 95 % interval is above 0."""

from __future__ import annotations

import json

import pytest

from agl_bridge.training.heldout_rule import judge_heldout, main


def _summary(before: float, after: float, n: int = 128) -> dict:
    return {"rewards": [0.1], "validation": [{"reward_mean": before, "n": n}, {"reward_mean": after, "n": n}]}


def test_a_large_gain_on_enough_tasks_is_reached():
    r = judge_heldout(_summary(0.30, 0.55))
    assert r.ok and r.low > 0 and r.gain == pytest.approx(0.25)


def test_a_gain_whose_interval_reaches_zero_or_below_the_target_is_missed():
    assert not judge_heldout(_summary(0.30, 0.50, n=16)).ok  # +0.20, but 16 tasks: the interval spans 0
    assert not judge_heldout(_summary(0.30, 0.40)).ok  # +0.10 < 0.15


def test_a_summary_without_both_validations_is_refused():
    with pytest.raises(ValueError, match="validation before training"):
        judge_heldout({"rewards": [], "validation": [{"reward_mean": 0.2, "n": 8}]})


def test_the_sampled_validation_is_reported_but_the_greedy_one_decides(tmp_path, capsys):
    summary = _summary(0.30, 0.35)
    summary["validation_sampled"] = [{"reward_mean": 0.20, "n": 128}, {"reward_mean": 0.50, "n": 128}]
    assert judge_heldout(summary, "validation_sampled").ok
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    assert main([str(path), "--started", "0"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert "sampled held-out accuracy (training temperature) 0.200 -> 0.500 (+0.300" in lines[-2]
    assert lines[-1].startswith("demo-real: held-out accuracy 0.300 -> 0.350 (+0.050") and lines[-1].endswith("missed")

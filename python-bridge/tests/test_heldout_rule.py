"""``make demo-real``'s rule: a held-out gain of at least +0.15 whose 95 % interval is above 0."""

from __future__ import annotations

import pytest

from agl_bridge.training.heldout_rule import judge_heldout


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

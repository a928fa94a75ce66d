"""Rollout-level advantages through VERL's compute_advantage (real verl on CPU), against hand-computed GRPO."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

from rollouts import rollout, triplet  # noqa: E402

from agl_bridge.training.advantage import compute_rollout_level_advantage, drop_marked_rows, shape_batch  # noqa: E402
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto  # noqa: E402


def batch(groups: dict[str, list[tuple[float, int]]]):
    """groups: group id -> [(reward, rows of that rollout)]."""
    rs = []
    for g, rollouts in groups.items():
        for i, (reward, rows) in enumerate(rollouts):
            triplets = [triplet([1, 2], [3 + k, 4], logprobs=[-0.1, -0.1], turn_index=k) for k in range(rows)]
            rs.append(rollout(f"{g}-r{i}", g, triplets, final_reward=reward))
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
    return data


def test_hand_computed_grpo_with_multi_row_rollouts():
    # Group A: rewards 1, 0, 0.5 — rollout 0 made 3 LLM calls (3 rows), the others one each.
    # Group B: rewards 1, 1 (no spread: advantage 0).
    data = batch({"A": [(1.0, 3), (0.0, 1), (0.5, 1)], "B": [(1.0, 1), (1.0, 2)]})
    data, metrics = compute_rollout_level_advantage(data, "grpo")
    adv = data.batch["advantages"][:, 0].tolist()
    # By hand, per rollout (not per row): mean 0.5, unbiased std sqrt(((0.5)^2 + (0.5)^2 + 0) / 2) = 0.5.
    eps = 1e-6
    a0, a1, a2 = 0.5 / (0.5 + eps), -0.5 / (0.5 + eps), 0.0
    expected = [a0, a0, a0, a1, a2, 0.0, 0.0, 0.0]
    assert adv == pytest.approx(expected, abs=1e-5)
    # Row-level GRPO would have counted rollout 0 three times: mean 0.7, a different baseline.
    assert not math.isclose(adv[3], (0.0 - 0.7) / 0.447, abs_tol=1e-2)
    # Broadcast under each row's response mask; returns equal advantages for GRPO.
    assert data.batch["advantages"][0].tolist() == pytest.approx([a0, a0], abs=1e-5)
    assert torch.allclose(data.batch["returns"], data.batch["advantages"])
    assert metrics["training/rollout_level_advantage/n_rollouts"] == 5
    assert metrics["training/rollout_level_advantage/n_multi_row_rollouts"] == 2
    assert metrics["training/rollout_level_advantage/max_rows_per_rollout"] == 3
    assert torch.equal(data.batch["token_level_rewards"], data.batch["token_level_scores"])


def test_grpo_without_std_normalisation_and_rloo():
    data = batch({"A": [(1.0, 1), (0.0, 1), (0.5, 1)]})
    data, _ = compute_rollout_level_advantage(data, "grpo", norm_adv_by_std_in_grpo=False)
    assert data.batch["advantages"][:, 0].tolist() == pytest.approx([0.5, -0.5, 0.0], abs=1e-6)
    data = batch({"A": [(1.0, 1), (0.0, 1), (0.5, 1)]})
    data, _ = compute_rollout_level_advantage(data, "rloo")
    # RLOO: reward minus the mean of the other rollouts = n/(n-1) * (reward - group mean).
    expected = [1 - 0.25, 0 - 0.75, 0.5 - 0.5]
    assert data.batch["advantages"][:, 0].tolist() == pytest.approx(expected, abs=1e-5)


def test_inconsistent_rollouts_and_gae_refused():
    data = batch({"A": [(1.0, 2), (0.0, 1)]})
    data.batch["token_level_scores"][1, 1] = 0.5  # second row of rollout A-r0 now has another reward
    with pytest.raises(ValueError, match="different rewards"):
        compute_rollout_level_advantage(data, "grpo")
    with pytest.raises(ValueError, match="GAE"):
        compute_rollout_level_advantage(batch({"A": [(1.0, 1)]}), "gae")


def test_drop_and_shape_batch():
    data = batch({"A": [(1.0, 1), (0.0, 1)], "B": [(1.0, 1), (1.0, 1)], "C": [(0.0, 1), (0.5, 1)]})
    data.batch["is_drop_mask"][0] = True
    kept, dropped = drop_marked_rows(data)
    assert dropped == 1 and len(kept) == 5
    shaped, metrics = shape_batch(data, multiple=2)
    assert shaped is not None and len(shaped) == 4
    assert metrics["training/n_sample_dropped/marked"] == 1
    # The remainder row comes from a group whose rewards are all equal (A, left with one row, or B); the mixed group
    # C, the only one with a learning signal, is kept whole.
    assert metrics["training/n_sample_dropped/same_reward"] == 1 and metrics["training/n_sample_dropped/random"] == 0
    assert list(shaped.non_tensor_batch["uid"]).count("C") == 2
    nothing, _ = shape_batch(batch({"A": [(1.0, 1)]}), multiple=4)
    assert nothing is None

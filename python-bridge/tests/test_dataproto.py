"""Triplets → DataProto with the real verl package (CPU): every key, shape, padding, truncation, drop, reward
position, masks and logprobs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

from rollouts import rollout, triplet  # noqa: E402

from agl_bridge.store.triplets import RolloutTriplets, Triplet  # noqa: E402
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto  # noqa: E402

PAD = 0


def rollouts() -> list[RolloutTriplets]:
    return [
        rollout(
            "r1",
            "g1",
            [
                triplet([11, 12, 13], [21, 22], logprobs=[-0.1, -0.2], turn_index=0),
                triplet([11, 12, 13, 21, 22, 14], [23], logprobs=[-0.3], turn_index=1),
            ],
            final_reward=1.0,
        ),
        rollout("r2", "g1", [triplet([11], [24, 25, 26], logprobs=[-0.4, -0.5, -0.6])], final_reward=0.25),
    ]


def test_keys_shapes_and_dtypes():
    data, stats = to_dataproto(rollouts(), ConvertOptions(pad_token_id=PAD))
    b = data.batch
    assert set(b.keys()) == {
        "prompts",
        "responses",
        "input_ids",
        "attention_mask",
        "position_ids",
        "response_mask",
        "token_level_scores",
        "rollout_log_probs",
        "is_drop_mask",
    }
    assert b["prompts"].shape == (3, 6) and b["responses"].shape == (3, 3)
    for key in ("input_ids", "attention_mask", "position_ids"):
        assert b[key].shape == (3, 9) and b[key].dtype == torch.long
    assert b["response_mask"].dtype == torch.long
    assert b["token_level_scores"].dtype == torch.float32 and b["rollout_log_probs"].dtype == torch.float32
    assert b["is_drop_mask"].dtype == torch.bool
    assert list(data.non_tensor_batch["uid"]) == ["g1", "g1", "g1"]
    assert list(data.non_tensor_batch["data_id_list"]) == ["g1", "g1", "g1"]
    assert list(data.non_tensor_batch["rollout_id_list"]) == ["r1", "r1", "r2"]
    assert list(data.non_tensor_batch["turn_index_list"]) == [0, 1, 0]
    assert stats.n_rollouts == 2 and stats.n_triplets == 3 and stats.n_rows == 3
    assert stats.reward_mean == pytest.approx(0.625)


def test_padding_positions_and_masks():
    data, _ = to_dataproto(rollouts(), ConvertOptions(pad_token_id=PAD))
    b = data.batch
    # Prompts left-padded, responses right-padded.
    assert b["prompts"][0].tolist() == [0, 0, 0, 11, 12, 13]
    assert b["prompts"][2].tolist() == [0, 0, 0, 0, 0, 11]
    assert b["responses"][0].tolist() == [21, 22, 0]
    assert b["responses"][2].tolist() == [24, 25, 26]
    assert b["input_ids"][0].tolist() == [0, 0, 0, 11, 12, 13, 21, 22, 0]
    assert b["attention_mask"][0].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 0]
    # cumsum(mask) - 1, clamped at 0.
    assert b["position_ids"][0].tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 4]
    assert b["position_ids"][2].tolist() == [0, 0, 0, 0, 0, 0, 1, 2, 3]
    assert b["response_mask"].tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1]]


def test_reward_at_last_response_token_and_same_for_every_row_of_a_rollout():
    data, _ = to_dataproto(rollouts(), ConvertOptions(pad_token_id=PAD))
    scores = data.batch["token_level_scores"]
    assert scores.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.25]]
    assert scores.sum(-1).tolist() == [1.0, 1.0, 0.25]


def test_logprobs_aligned_and_zero_on_padding():
    data, _ = to_dataproto(rollouts(), ConvertOptions(pad_token_id=PAD))
    lp = data.batch["rollout_log_probs"]
    assert lp[0].tolist() == pytest.approx([-0.1, -0.2, 0.0])
    assert lp[1].tolist() == pytest.approx([-0.3, 0.0, 0.0])
    assert lp[2].tolist() == pytest.approx([-0.4, -0.5, -0.6])


def test_logprobs_omitted_when_any_row_lacks_them():
    rs = rollouts()
    del rs[1].triplets[0].logprobs[:]
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=PAD))
    assert "rollout_log_probs" not in data.batch.keys()


def test_prompt_truncation_marks_drop_and_response_truncation_cuts():
    options = ConvertOptions(pad_token_id=PAD, max_prompt_length=4, max_response_length=2)
    data, stats = to_dataproto(rollouts(), options)
    b = data.batch
    assert b["prompts"].shape == (3, 4) and b["responses"].shape == (3, 2)
    # The over-long prompt keeps its first P tokens and is marked, not removed.
    assert b["prompts"][1].tolist() == [11, 12, 13, 21]
    assert b["is_drop_mask"].tolist() == [False, True, False]
    # The over-long response keeps its first R tokens; the reward moves to its new last token.
    assert b["responses"][2].tolist() == [24, 25]
    assert b["rollout_log_probs"][2].tolist() == pytest.approx([-0.4, -0.5])
    assert b["token_level_scores"][2].tolist() == [0.0, 0.25]
    assert stats.n_prompt_too_long == 1 and stats.n_truncated_responses == 1


def test_pad_to_max_gives_fixed_shapes():
    options = ConvertOptions(pad_token_id=PAD, max_prompt_length=8, max_response_length=5, pad_to_max=True)
    data, _ = to_dataproto(rollouts(), options)
    assert data.batch["prompts"].shape == (3, 8) and data.batch["responses"].shape == (3, 5)
    assert data.batch["token_level_scores"][2].tolist() == [0.0, 0.0, 0.25, 0.0, 0.0]


def test_trajectory_mask_zero_on_inserted_tokens():
    rs = [
        rollout(
            "r",
            "g",
            [triplet([1], [5, 6, 7, 8], mask=[1, 0, 0, 1], logprobs=[-1, 0, 0, -2])],
            final_reward=1.0,
        )
    ]
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=PAD))
    assert data.batch["response_mask"][0].tolist() == [1, 0, 0, 1]
    assert data.batch["rollout_log_probs"][0].tolist() == pytest.approx([-1.0, 0.0, 0.0, -2.0])
    assert data.batch["token_level_scores"][0].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_missing_reward_filled_empty_rows_skipped_rollouts_without_triplets_counted():
    rs = [
        rollout("r1", "g", [triplet([1], [2])], final_reward=None),
        rollout("r2", "g", [triplet([1], [])], final_reward=1.0),
        rollout("r3", "g", [], final_reward=0.5),
    ]
    data, stats = to_dataproto(rs, ConvertOptions(pad_token_id=PAD, reward_fillna=-1.0))
    assert len(data) == 1
    assert data.batch["token_level_scores"][0].tolist() == [-1.0]
    assert stats.n_skipped_empty == 1 and stats.n_rollouts_with_triplets == 2 and stats.n_rollouts_with_reward == 2
    assert stats.reward_mean == pytest.approx((-1.0 + 1.0 + 0.5) / 3)


def test_no_rows_is_an_error_and_group_id_required():
    with pytest.raises(ValueError, match="no trainable rows"):
        to_dataproto([rollout("r", "g", [])], ConvertOptions(pad_token_id=PAD))
    with pytest.raises(ValueError, match="no group id"):
        to_dataproto([rollout("r", "", [triplet([1], [2])])], ConvertOptions(pad_token_id=PAD))


def test_triplets_must_have_one_mask_entry_per_response_token():
    unmasked = rollout("r", "g", [Triplet(prompt_token_ids=[1], response_token_ids=[2, 3])])
    with pytest.raises(ValueError, match="do not match the response ids"):
        to_dataproto([unmasked], ConvertOptions(pad_token_id=PAD))
    short_logprobs = rollout("r", "g", [triplet([1], [2, 3], logprobs=[-0.5])])
    with pytest.raises(ValueError, match="do not match the response ids"):
        to_dataproto([short_logprobs], ConvertOptions(pad_token_id=PAD))

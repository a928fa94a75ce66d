"""Off-policy correction with the log-probs the engine sampled with, through VERL's rollout correction
(``algorithm.rollout_correction``; ``verl.trainer.ppo.rollout_corr_helper``), in its decoupled mode: the batch's
``old_log_probs`` come from the weights being updated, ``rollout_log_probs`` from whichever weights served each call,
and the importance weights between the two (truncated at ``rollout_is_threshold``) scale each token's policy loss
(``rollout_is_weights``, which VERL's policy losses take). Both trainers use it; asynchronous training
(``max_staleness`` > 0) turns it on by default, since there the two policies differ by up to that many updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl import DataProto
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch

__all__ = ["DEFAULT_ASYNC_CORRECTION", "apply_rollout_correction", "resolve_rollout_correction"]

# Token-level truncated importance sampling, the setting Agent Lightning recommends for asynchronous training.
DEFAULT_ASYNC_CORRECTION: dict[str, Any] = {"rollout_is": "token", "rollout_is_threshold": 2.0}


def resolve_rollout_correction(
    configured: Mapping[str, Any] | None, max_staleness: int, enabled: bool | None = None
) -> dict[str, Any] | None:
    """The correction to apply: ``configured`` (VERL's ``rollout_correction`` keys) when it asks for importance
    weights or rejection; else, when ``enabled`` or (``enabled`` None) ``max_staleness`` > 0, token-level TIS with
    ``configured``'s threshold; else None. ``enabled`` False turns it off whatever is configured."""
    if enabled is False:
        return None
    settings = dict(configured or {})
    if settings.get("rollout_is") or settings.get("rollout_rs"):
        return settings
    if enabled or (enabled is None and max_staleness > 0):
        threshold = settings.get("rollout_is_threshold") or DEFAULT_ASYNC_CORRECTION["rollout_is_threshold"]
        return {**settings, **DEFAULT_ASYNC_CORRECTION, "rollout_is_threshold": threshold}
    return None


def apply_rollout_correction(
    data: DataProto, correction: Mapping[str, Any] | None
) -> tuple[DataProto, dict[str, float]]:
    """Adds ``rollout_is_weights`` (and applies rejection to ``response_mask``) to a batch that has ``old_log_probs``;
    returns it and VERL's ``rollout_corr/*`` metrics. A batch without ``rollout_log_probs`` (an engine that returned no
    logprobs) is left as it is, with ``rollout_corr/missing_rollout_log_probs`` 1."""
    if correction is None:
        return data, {}
    if "rollout_log_probs" not in data.batch.keys():
        return data, {"rollout_corr/missing_rollout_log_probs": 1.0}
    data, metrics = compute_rollout_correction_and_add_to_batch(data, dict(correction))
    return data, {k: float(v) for k, v in metrics.items()}

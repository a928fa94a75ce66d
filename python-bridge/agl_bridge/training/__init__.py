"""The training loop both trainers share and its pieces: triplets → VERL ``DataProto``, rollout-level advantages,
staleness, validation, rollout correction, task files and the reward plot."""

"""What a training step costs on a real model (``make bench-real-model``): Gemma 3 270M (``make model-gemma``), the
word-math agent's first call (its instructed prompt), ROWS rows of it.

Prints seconds and bytes for each phase of a step of the local trainer and of what VERL's CPU replica does:

- generation: ROWS requests sampled in one batch by the policy server's sampler (shared prefix computed once);
- old log-prob: a no-grad pass over the rows (VERL's ``compute_log_prob``; the local trainer skips it on-policy);
- update: one GRPO update over the rows in micro-batches (frozen embeddings, AdamW), old log-probs included; the
  prompts' shared prefix once per micro-batch (``prefix_forward``), and without it for comparison;
- weight push: the full state dict as VERL's CPU replica used to receive it (pickled, as Ray sends it) and loaded,
  against what it receives now: only the tensors an update changed (``WeightDelta``: a digest per tensor; with
  frozen embeddings the embedding stays behind), hashed, pickled and loaded;
- bridge: triplets to ``DataProto`` and GRPO advantages for the rows;
- memory: the process's peak resident set.

    PYTHONPATH=python-bridge python-bridge/.venv/bin/python python-bridge/bench/real_model_bench.py [--rows 32]
"""

from __future__ import annotations

import argparse
import pickle
import resource
import time
from pathlib import Path

import torch

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.local import prefix_forward
from agl_bridge.local.batching import SampleRequest
from agl_bridge.local.model import load_model
from agl_bridge.local.policy import GrpoConfig, Policy
from agl_bridge.store.triplets import RolloutTriplets, Triplet
from agl_bridge.training.advantage import compute_rollout_level_advantage
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto
from agl_bridge.verl.cpu_rollout import WeightDelta

REPO = Path(__file__).resolve().parents[2]
GEMMA = REPO / ".cache/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf.hf"
QUESTIONS = [
    "Ann has {a} apples and buys 4 bags with {b} apples in each. How many apples does Ann have now?",
    "Ben is 9 years old. Ben had {a} books and gave 3 friends {b} books each. How many books are left?",
]


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    (model, tokenizer), load_s = _timed(lambda: load_model(GEMMA))
    policy = Policy(model, tokenizer, GrpoConfig(lr=1e-6, freeze_embeddings=True, micro_batch_size=8, ppo_epochs=1))
    delta = WeightDelta()
    _, first_hash_s = _timed(lambda: [delta.changed(k, v) for k, v in model.state_dict().items()])
    template = (REPO / "examples/word-math/prompts/instructed.txt").read_text().rstrip("\n")
    prompts = [
        policy.encode_text(template.replace("{question}", QUESTIONS[i % 2].format(a=40 + i, b=2 + i % 9)))
        for i in range(a.rows)
    ]
    requests = [SampleRequest(ids, 12, temperature=1.0, stop_texts=("\n",), seed=i) for i, ids in enumerate(prompts)]
    outs, gen_s = _timed(lambda: policy.generate_batch_sync(requests))
    tokens = sum(len(o.token_ids) for o in outs)

    def rollouts() -> list[RolloutTriplets]:
        return [
            RolloutTriplets(
                rollout_id=f"r{i}",
                group_id=f"g{i // 8}",
                status=types_pb2.ROLLOUT_STATUS_SUCCEEDED,
                final_reward=float(i % 3 == 0),
                triplets=[
                    Triplet(
                        prompt_token_ids=ids,
                        response_token_ids=o.token_ids,
                        logprobs=o.logprobs,
                        response_mask=[1] * len(o.token_ids),
                    )
                ],
            )
            for i, (ids, o) in enumerate(zip(prompts, outs, strict=True))
        ]

    def bridge():
        data, _ = to_dataproto(rollouts(), ConvertOptions(pad_token_id=int(tokenizer.pad_token_id)))
        data, _ = compute_rollout_level_advantage(data, "grpo")
        return data

    data, bridge_s = _timed(bridge)
    with torch.no_grad():
        _, old_s = _timed(lambda: torch.cat([policy.response_log_probs(mb) for mb in policy._micro_batches(data)]))
    policy.grpo.ppo_epochs = 2  # two passes, so the old log-probs are a pass of their own as in VERL
    _, update2_s = _timed(lambda: policy.update_sync(bridge()))
    policy.grpo.ppo_epochs = 1
    _, update_s = _timed(lambda: policy.update_sync(bridge()))
    # The same update with every row's whole prompt in the pass (no shared prefix), as before prefix_forward.
    shared_min, prefix_forward.MIN_SHARED_PREFIX = prefix_forward.MIN_SHARED_PREFIX, 1 << 30
    _, plain_update_s = _timed(lambda: policy.update_sync(bridge()))
    prefix_forward.MIN_SHARED_PREFIX = shared_min
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    blob, pickle_s = _timed(lambda: pickle.dumps(state, protocol=5))
    _, load_weights_s = _timed(lambda: model.load_state_dict(pickle.loads(blob)))
    changed, hash_s = _timed(lambda: {k: v for k, v in state.items() if delta.changed(k, v)})
    small, small_pickle_s = _timed(lambda: pickle.dumps(changed, protocol=5))
    _, small_load_s = _timed(lambda: model.load_state_dict(pickle.loads(small), strict=False))
    small_s = hash_s + small_pickle_s + small_load_s
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"real-model bench: Gemma 3 270M fp32, {a.rows} rows of the word-math prompt ({len(prompts[0])} tokens),"
        f" {a.threads} threads; load {load_s:.1f} s"
    )
    print(f"  generation    {gen_s:7.2f} s  ({tokens} tokens, {tokens / gen_s:.1f} tok/s, one batch)")
    print(f"  old log-prob  {old_s:7.2f} s  (no-grad pass over {len(data)} rows)")
    print(
        f"  update        {update_s:7.2f} s  (1 epoch on-policy, no separate old pass);"
        f" {update2_s:.2f} s for 2 epochs with the old pass; {plain_update_s:.2f} s without the shared prefix"
    )
    print(
        f"  weight push   {pickle_s + load_weights_s:7.2f} s  ({len(blob) / 2**20:.0f} MiB pickled in {pickle_s:.2f} s,"
        f" loaded in {load_weights_s:.2f} s)"
    )
    print(
        f"  changed only  {small_s:7.2f} s  ({len(small) / 2**20:.0f} MiB, {len(changed)} of {len(state)} tensors:"
        f" hashed in {hash_s:.2f} s, pickled in {small_pickle_s:.2f} s, loaded in {small_load_s:.2f} s;"
        f" the first push hashes all in {first_hash_s:.2f} s)"
    )
    print(f"  bridge        {bridge_s:7.2f} s  (triplets -> DataProto -> GRPO advantages)")
    print(
        f"  memory peak   {peak_gib:7.2f} GiB resident (model, AdamW over the non-embedding weights, the pushed copy)"
    )
    policy.close()


if __name__ == "__main__":
    main()

"""What of the VERL trainer runs without its workers: config composition on top of VERL's ppo_trainer, the loop
settings, and the step logic of VerlBackend against a stand-in for the V1 trainer's workers and its TransferQueue (the
real ones run in tests/test_verl_cpu.py) — with a
real agl LLM proxy (``agl serve --proxy``) in front of a loopback OpenAI-compatible engine for the pause/drain around
the weight swap, and VERL's checkpoint cadence (``trainer.save_freq``) across a kill and a resume."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")
pytest.importorskip("hydra")

from conftest import run_store_server  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from rollouts import rollout, triplet  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainer  # noqa: E402

from agl_bridge.errors import ConfigError  # noqa: E402
from agl_bridge.store.proxy_admin import ProxyAdmin, ProxyAdminError, admin_base_url  # noqa: E402
from agl_bridge.training.advantage import compute_rollout_level_advantage  # noqa: E402
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto  # noqa: E402
from agl_bridge.training.task_files import load_tasks  # noqa: E402
from agl_bridge.verl import VerlBackend, compose_config  # noqa: E402
from agl_bridge.verl.backend import mini_batch_rows  # noqa: E402
from agl_bridge.verl.settings import (  # noqa: E402
    apply_staleness,
    bypass_mode,
    loop_config,
    max_staleness,
    rollout_correction,
    val_sampling,
)
from agl_bridge.verl.tq_batch import PARTITION, TransferQueueBatches  # noqa: E402
from agl_bridge.verl.trainer import AglRayPPOTrainer, AglTaskRunner  # noqa: E402


def test_config_composes_on_top_of_verl_ppo_trainer():
    cfg = compose_config(
        [
            "agl.store=http://store:1",
            "actor_rollout_ref.rollout.n=8",
            "data.train_batch_size=16",
            "trainer.total_training_steps=3",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    # VERL's own tree is there, with our defaults and overrides on top.
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size > 0
    assert cfg.actor_rollout_ref.rollout.mode == "async"
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.data.filter_overlong_prompts is False
    assert cfg.agl.store == "http://store:1" and loop_config(cfg).llm_name == "main_llm"
    assert cfg.agl.drain_timeout == 60
    loop = loop_config(cfg)
    assert (loop.n, loop.tasks_per_step, loop.total_steps) == (8, 16, 3)
    assert loop.max_prompt_length == cfg.data.max_prompt_length
    assert loop.checkpoint_dir.endswith("/agl")
    # VERL's checkpoint cadence drives the loop's: agl's default 10 (VERL's -1 would never save), resume unless
    # trainer.resume_mode is disable.
    assert (loop.save_freq, loop.resume) == (10, True)
    off = loop_config(compose_config(["trainer.save_freq=-1", "trainer.resume_mode=disable"]))
    assert (off.save_freq, off.resume) == (-1, False)


def test_trainer_is_verl_v1_trainer_with_its_sync_hooks():
    from verl.trainer.ppo.v1 import PPOTrainerSync

    assert issubclass(AglRayPPOTrainer, PPOTrainerSync) and issubclass(AglRayPPOTrainer, PPOTrainer)
    assert AglRayPPOTrainer.fit is not PPOTrainer.fit
    assert callable(AglTaskRunner.run)


class MemoryKV:
    """Stands in for TransferQueue's key-value calls (``kv_batch_put`` / ``kv_batch_get`` / ``kv_clear``), which
    need its Ray actors: rows by key, fields merged on put, jagged tensors out, as TransferQueue returns them."""

    def __init__(self):
        self.rows: dict[tuple[str, str], dict] = {}
        self.tags: dict[tuple[str, str], dict] = {}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, key in enumerate(keys):
            row = self.rows.setdefault((partition_id, key), {})
            for name in fields.keys() if fields is not None else []:
                value = fields[name]
                row[name] = value.unbind()[i] if isinstance(value, torch.Tensor) and value.is_nested else value[i]
            if tags is not None:
                self.tags[(partition_id, key)] = dict(tags[i])
        tags = [self.tags[(partition_id, k)] for k in keys]
        # As TransferQueue's, the returned meta names every field the rows hold: what VERL's workers fetch.
        fields = sorted(set().union(*(self.rows.get((partition_id, k), {}).keys() for k in keys)))
        return KVBatchMeta(keys=list(keys), tags=tags, partition_id=partition_id, fields=fields)

    def kv_batch_get(self, keys, partition_id, select_fields):
        rows = [self.rows[(partition_id, k)] for k in keys]
        fields = {f: torch.nested.as_nested_tensor([r[f] for r in rows], layout=torch.jagged) for f in select_fields}
        return TensorDict(fields, batch_size=[len(keys)])

    def kv_clear(self, keys, partition_id):
        for key in keys:
            self.rows.pop((partition_id, key), None)
            self.tags.pop((partition_id, key), None)


class FakeWorkers:
    """Stands in for the V1 trainer's phases over its TransferQueue: records the calls VerlBackend makes, in
    order, and reads and writes the rows as VERL's workers do."""

    def __init__(self, config):
        self.config = config
        self.global_steps = 5
        self.calls: list[str] = []
        self.use_reference_policy = False
        self.use_critic = False
        self.tokenizer = type("Tok", (), {"pad_token_id": 0})()
        self.llm_server_manager = type("M", (), {"get_addresses": lambda _: ["10.0.0.1:8000", "10.0.0.2:8000"]})()
        outer = self

        class Ckpt:
            def sleep_replicas(self):
                outer.calls.append("sleep")

            def update_weights(self, step):
                outer.calls.append(f"update_weights@{step}")

        self.checkpoint_manager = Ckpt()
        self.kv = MemoryKV()
        self.step_batches = TransferQueueBatches(self.kv)

    def _balance_batch(self, batch, metrics):
        self.calls.append("balance")
        return batch

    def _compute_old_log_prob(self, batch, metrics):
        self.calls.append(f"old_log_prob[{len(batch)}]")
        mask = self.kv.kv_batch_get(batch.keys, batch.partition_id, ["response_mask"])["response_mask"]
        old = torch.nested.as_nested_tensor([torch.zeros(len(m)) for m in mask.unbind()], layout=torch.jagged)
        return self.kv.kv_batch_put(batch.keys, batch.partition_id, TensorDict({"old_log_probs": old}, [len(batch)]))

    def _compute_ref_log_prob(self, batch, metrics):
        # As verl 0.9.1's: the field is put, the meta from before returned.
        self.calls.append("ref_log_prob")
        mask = self.kv.kv_batch_get(batch.keys, batch.partition_id, ["response_mask"])["response_mask"]
        ref = torch.nested.as_nested_tensor([torch.full((len(m),), -1.0) for m in mask.unbind()], layout=torch.jagged)
        self.kv.kv_batch_put(batch.keys, batch.partition_id, TensorDict({"ref_log_prob": ref}, [len(batch)]))
        return batch

    def _update_actor(self, batch, metrics):
        fields = ["advantages", "response_mask", "input_ids", "position_ids", "loss_mask"]
        # On CPU an on-policy update comes without them: agl's CPU engine takes the update's own (cpu_engine).
        fields += [] if metrics.get("training/old_log_prob_pass_skipped") else ["old_log_probs"]
        fields += ["ref_log_prob"] if self.use_reference_policy else []
        # VERL's workers fetch the fields the meta names (tqbridge): a field missing there is a KeyError.
        missing = sorted(set(fields) - set(batch.fields or []))
        assert not missing, f"the meta handed to _update_actor does not name {missing}"
        rows = self.kv.kv_batch_get(batch.keys, batch.partition_id, fields)
        assert all(rows[f].is_nested for f in fields)
        self.calls.append(f"update_actor[{len(batch)}]")
        self.updated = rows
        # What VERL's _update_actor reads as its mini-batch, in rows.
        self.mini_batch = (
            self.config.actor_rollout_ref.actor.ppo_mini_batch_size * self.config.actor_rollout_ref.rollout.n
        )
        metrics["actor/pg_loss"] = 0.375
        return batch


def make_batch(calls: int = 1):
    rs = []
    for g, rewards in {"a": [1.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [0.0, 1.0, 0.0]}.items():
        for i, r in enumerate(rewards):
            rs.append(rollout(f"{g}{i}", g, [triplet([5, 6], [7, 8])] * calls, final_reward=r))
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
    data, _ = compute_rollout_level_advantage(data, "grpo")
    return data


def test_verl_backend_step_order_shaping_and_resources():
    cfg = compose_config(
        [
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.rollout.n=3",
            "actor_rollout_ref.model.path=/models/tiny",
            "trainer.balance_batch=true",
        ]
    )
    workers = FakeWorkers(cfg)
    backend = VerlBackend(workers, proxy_url="http://proxy:4748/v1")
    metrics = backend.update_sync(make_batch())
    # 9 rows, mini-batches of 2 tasks x 3 rollouts: 6 rows kept, the zero-advantage group "b" dropped first.
    assert workers.calls == ["sleep", "balance", "old_log_prob[6]", "update_actor[6]", "update_weights@5"]
    assert metrics["training/n_sample_dropped/same_reward"] == 3 and metrics["actor/pg_loss"] == pytest.approx(0.375)
    assert workers.global_steps == 6
    # VERL's V1 phases read the rows unpadded from TransferQueue: prompt + response, the group's advantages; the step's
    # rows are cleared afterwards.
    updated = workers.updated
    assert [len(r) for r in updated["input_ids"].unbind()] == [4] * 6
    advantages = sorted(round(float(a[0]), 3) for a in updated["advantages"].unbind())
    assert advantages == [-1.155, -0.577, -0.577, 0.577, 0.577, 1.155]
    assert workers.kv.rows == {}
    resources = backend.resources()
    assert resources["main_llm"].WhichOneof("kind") == "proxy_llm"
    assert resources["main_llm"].proxy_llm.endpoint == "http://proxy:4748/v1"
    assert [resources[f"policy-{i}"].llm.endpoint for i in range(2)] == [
        "http://10.0.0.1:8000/v1",
        "http://10.0.0.2:8000/v1",
    ]
    assert resources["policy-0"].llm.model == "/models/tiny"
    # Without a proxy, the agents' LLM is the first replica.
    assert VerlBackend(workers).resources()["main_llm"].llm.endpoint == "http://10.0.0.1:8000/v1"


def test_an_on_policy_update_on_cpu_skips_the_old_log_prob_pass():
    # One pass over one mini-batch: the old log-probs would be the update's own, so agl's CPU engine takes those
    # and VERL's separate pass over the rows is not run. Two epochs, or two mini-batches, need it.
    def steps(*overrides):
        cfg = compose_config(["actor_rollout_ref.rollout.n=3", "trainer.device=cpu", *overrides])
        workers = FakeWorkers(cfg)
        metrics = VerlBackend(workers).update_sync(make_batch())
        return workers, metrics

    workers, metrics = steps("actor_rollout_ref.actor.ppo_mini_batch_size=2")
    assert workers.calls == ["sleep", "balance", "update_actor[6]", "update_weights@5"]
    assert metrics["training/old_log_prob_pass_skipped"] == 1.0
    assert "old_log_probs" not in workers.updated.keys()
    workers, metrics = steps("actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_epochs=2")
    assert "old_log_prob[6]" in workers.calls and "training/old_log_prob_pass_skipped" not in metrics
    workers, _ = steps("actor_rollout_ref.actor.ppo_mini_batch_size=1")  # 9 rows in mini-batches of 3
    assert workers.calls == ["sleep", "balance", "old_log_prob[9]", "update_actor[9]", "update_weights@5"]
    workers, _ = steps("actor_rollout_ref.actor.ppo_mini_batch_size=2", "trainer.device=cuda")
    assert "old_log_prob[6]" in workers.calls  # VERL's own engines need them sent


def test_a_mini_batch_holds_every_row_of_its_rollouts():
    # Two LLM calls a rollout: a mini-batch of 3 tasks x 3 rollouts is their 18 rows (VERL's own multi-turn loop
    # puts a rollout's turns in one row), one optimizer step, not two of 9 rows each.
    cfg = compose_config(["actor_rollout_ref.actor.ppo_mini_batch_size=3", "actor_rollout_ref.rollout.n=3"])
    workers = FakeWorkers(cfg)
    metrics = VerlBackend(workers).update_sync(make_batch(calls=2))
    assert workers.calls[-2:] == ["update_actor[18]", "update_weights@5"]
    assert workers.mini_batch == 18 and metrics["training/mini_batch_rows"] == 18
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 3  # set for the call only
    # One row a rollout: VERL's ppo_mini_batch_size x n rows.
    VerlBackend(workers).update_sync(make_batch())
    assert workers.mini_batch == 9


def test_mini_batch_rows_follow_the_rows_per_rollout_in_multiples_of_n():
    rs = [
        rollout(f"r{i}", f"g{i // 3}", [triplet([5], [7])] * (1 if i < 2 else 2), final_reward=float(i % 2))
        for i in range(9)
    ]
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
    assert len(data) == 16
    assert mini_batch_rows(data, 3, 3) == 15  # 16 rows of 9 rollouts, down to a multiple of 3
    assert mini_batch_rows(data, 1, 3) == 3
    assert mini_batch_rows(data[:0], 2, 3) == 6


def test_kl_reference_log_probs_reach_the_actor_update():
    workers = FakeWorkers(
        compose_config(["actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.rollout.n=3"])
    )
    workers.use_reference_policy = True
    VerlBackend(workers).update_sync(make_batch())
    assert workers.calls == [
        "sleep",
        "balance",
        "old_log_prob[6]",
        "ref_log_prob",
        "update_actor[6]",
        "update_weights@5",
    ]
    assert all(torch.equal(r, torch.full_like(r, -1.0)) for r in workers.updated["ref_log_prob"].unbind())


def test_async_settings_and_rollout_correction_come_from_agl_and_verl_keys():
    assert loop_config(compose_config()).max_staleness == 0 and rollout_correction(compose_config()) is None
    cfg = compose_config(
        ["agl.max_staleness=1", "actor_rollout_ref.actor.ppo_mini_batch_size=1", "actor_rollout_ref.rollout.n=3"]
    )
    assert loop_config(cfg).max_staleness == 1
    # On by default when asynchronous: token-level truncated IS at VERL's rollout_is_threshold.
    assert rollout_correction(cfg) == {**dict(cfg.algorithm.rollout_correction), "rollout_is": "token"}
    assert rollout_correction(compose_config(["agl.max_staleness=1", "agl.rollout_correction=false"])) is None
    chosen = rollout_correction(compose_config(["algorithm.rollout_correction.rollout_is=sequence"]))
    assert chosen is not None and chosen["rollout_is"] == "sequence"
    # The update weights each token by min(pi_actor / pi_rollout, 2): the engine's log-probs (-3) far below the
    # actor's (0, FakeWorkers) give weights clipped at 2, handed to VERL's actor update with the batch.
    seen = {}

    class Recording(FakeWorkers):
        def _update_actor(self, batch, metrics):
            seen["weights"] = self.kv.kv_batch_get(batch.keys, PARTITION, ["rollout_is_weights"])["rollout_is_weights"]
            return super()._update_actor(batch, metrics)

    rs = [
        rollout(f"r{i}", "g", [triplet([5, 6], [7, 8], logprobs=[-3.0, -3.0])], final_reward=float(i % 2))
        for i in range(3)
    ]
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
    data, _ = compute_rollout_level_advantage(data, "grpo")
    metrics = VerlBackend(Recording(cfg), rollout_correction=rollout_correction(cfg)).update_sync(data)
    assert all(torch.allclose(w, torch.full_like(w, 2.0)) for w in seen["weights"].unbind())
    assert metrics["rollout_corr/rollout_is_max"] == pytest.approx(2.0)


def test_bypass_mode_takes_the_engine_log_probs_as_old_ones():
    # VERL's bypass mode: the engine's log-probs are the old ones (no forward pass to recompute them), written with
    # the rows; agl then neither compares the two (they are the same tensor) nor weights one against the other, even
    # when asynchronous.
    keys = ["algorithm.rollout_correction.bypass_mode=true", "agl.max_staleness=1"]
    cfg = compose_config([*keys, "actor_rollout_ref.actor.ppo_mini_batch_size=1", "actor_rollout_ref.rollout.n=3"])
    assert bypass_mode(cfg) and not bypass_mode(compose_config()) and rollout_correction(cfg) is None

    def batch(logprobs):
        rs = [
            rollout(f"r{i}", "g", [triplet([5, 6], [7, 8], logprobs=logprobs)], final_reward=float(i % 2))
            for i in range(3)
        ]
        data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
        return compute_rollout_level_advantage(data, "grpo")[0]

    workers = FakeWorkers(cfg)
    metrics = VerlBackend(workers).update_sync(batch([-3.0, -3.0]))
    assert workers.calls == ["sleep", "balance", "update_actor[3]", "update_weights@5"]
    assert all(torch.equal(lp, torch.tensor([-3.0, -3.0])) for lp in workers.updated["old_log_probs"].unbind())
    assert not any(k.startswith(("training/rollout_actor_logprob", "rollout_corr/")) for k in metrics)
    with pytest.raises(ConfigError, match="bypass_mode=false"):
        VerlBackend(FakeWorkers(cfg)).update_sync(batch([]))


def test_one_staleness_setting_for_agl_and_verl():
    # agl.max_staleness decides and VERL's staleness cap is written to match (a group trained by the weights it was
    # enqueued under spans 1 version: VERL's threshold is k + 1); VERL's side stays on its synchronous path.
    cfg = compose_config(["agl.max_staleness=2"])
    apply_staleness(cfg)
    assert (cfg.agl.max_staleness, cfg.trainer.v1.trainer_mode, cfg.trainer.v1.sampler.max_off_policy_threshold) == (
        2,
        "sync",
        3,
    )
    sync = compose_config()
    apply_staleness(sync)
    assert (sync.agl.max_staleness, sync.trainer.v1.trainer_mode) == (0, "sync")
    # Left null, VERL's own keys decide: its asynchronous mode with its staleness cap t is k = t - 1.
    verl_keys = ["trainer.v1.trainer_mode=colocate_async", "trainer.v1.sampler.max_off_policy_threshold=2"]
    assert max_staleness(compose_config(verl_keys)) == 1 == loop_config(compose_config(verl_keys)).max_staleness
    assert rollout_correction(compose_config(verl_keys)) is not None  # asynchronous: the correction is on
    written = compose_config(verl_keys)
    apply_staleness(written)
    assert (written.agl.max_staleness, written.trainer.v1.trainer_mode) == (1, "sync") and max_staleness(written) == 1
    # Settings that fight, or a mode the agl loop cannot run, are errors naming the keys to change.
    with pytest.raises(ConfigError, match="agl.max_staleness=0"):
        max_staleness(compose_config(["trainer.v1.trainer_mode=colocate_async", "agl.max_staleness=0"]))
    with pytest.raises(ConfigError, match="separate_async"):
        max_staleness(compose_config(["trainer.v1.trainer_mode=separate_async"]))
    with pytest.raises(ConfigError, match="max_off_policy_threshold >= 2"):
        max_staleness(compose_config([verl_keys[0], "trainer.v1.sampler.max_off_policy_threshold=null"]))


def test_verl_backend_skips_a_step_with_too_few_rows():
    cfg = OmegaConf.merge(compose_config(["actor_rollout_ref.actor.ppo_mini_batch_size=8"]))
    workers = FakeWorkers(cfg)
    metrics = VerlBackend(workers).update_sync(make_batch())
    assert metrics["training/skipped_step"] == 1.0 and workers.calls == []


# -- validation ------------------------------------------------------------------------------------------------


def test_validation_settings_come_from_verl_keys():
    cfg = compose_config(
        [
            "agl.val_dataset=/data/val.jsonl",
            "trainer.test_freq=5",
            "trainer.val_before_train=false",
            "actor_rollout_ref.rollout.val_kwargs.n=4",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    loop = loop_config(cfg)
    assert (loop.test_freq, loop.val_before_train, loop.val_only, loop.val_n) == (5, False, False, 4)
    # VERL's default val_kwargs (do_sample false): greedy validation.
    assert loop.val_sampling == {"temperature": 0.0} and loop.val_timeout is None
    sampled = compose_config(
        ["actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.val_kwargs.temperature=0.6"]
    )
    assert val_sampling(sampled) == {"temperature": 0.6}
    same = compose_config(
        [
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            "actor_rollout_ref.rollout.temperature=1.0",
        ]
    )
    assert val_sampling(same) is None  # the training snapshot already samples that way
    # VERL's own defaults: validation before training, never periodically.
    default = loop_config(compose_config())
    assert (default.test_freq, default.val_before_train, default.val_n) == (-1, True, 1)


def test_val_tasks_load_from_jsonl_and_parquet(tmp_path):
    import pandas as pd

    (tmp_path / "val.jsonl").write_text('{"q": 1}\n\n{"q": 2}\n')
    pd.DataFrame(
        {"prompt": [[{"role": "user", "content": "hi"}]], "data_source": ["gsm"], "extra_info": [{"index": 3}]}
    ).to_parquet(tmp_path / "val.parquet")
    assert load_tasks(str(tmp_path / "val.jsonl")) == [{"q": 1}, {"q": 2}]
    rows = load_tasks([str(tmp_path / "val.parquet"), str(tmp_path / "val.jsonl")])
    assert rows[0] == {"prompt": [{"role": "user", "content": "hi"}], "data_source": "gsm", "extra_info": {"index": 3}}
    assert rows[1:] == [{"q": 1}, {"q": 2}]
    json.dumps(rows)  # plain JSON values, ready to be rollout inputs


def test_verl_tracking_logs_the_loop_metrics(capsys):
    cfg = compose_config(["trainer.logger=[console]", "actor_rollout_ref.model.path=/models/tiny"])
    trainer = AglRayPPOTrainer.__new__(AglRayPPOTrainer)
    trainer.config = cfg
    logger = trainer._tracking()
    logger.log(data={"val/reward_mean": 0.375, "val/reward_best@2": 0.625, "val/a/n": 4.0}, step=0)
    assert "val/reward_mean:0.375" in capsys.readouterr().out


class FakeAglTrainer(AglRayPPOTrainer):
    """AglRayPPOTrainer over FakeWorkers' stand-ins for VERL's workers (no Ray, no GPU), whose Tracking logger is
    a recorder."""

    def __init__(self, config):  # RayPPOTrainer.__init__ builds worker groups: not here
        fake = FakeWorkers(config)
        self.__dict__.update(fake.__dict__)
        self.global_steps = 0
        self.logged: list[tuple[dict, int]] = []
        self._fake = fake

    def _tracking(self):
        logged = self.logged
        return type("Recorder", (), {"log": lambda _, data, step: logged.append((dict(data), step))})()

    def _balance_batch(self, batch, metrics):
        self.calls.append("balance")
        return batch

    def _compute_old_log_prob(self, batch, metrics):
        return FakeWorkers._compute_old_log_prob(self, batch, metrics)

    def _backend(self):
        backend = super()._backend()
        if backend.proxy is not None:
            record_admin(backend, self.calls)
        return backend

    def _update_actor(self, batch, metrics):
        if getattr(self, "fail_at", None) == self.global_steps:
            raise RuntimeError("killed in the middle of step")
        return FakeWorkers._update_actor(self, batch, metrics)

    def _save_checkpoint(self):
        # As VERL: default_local_dir/global_step_{global_steps}/actor.
        self.calls.append(f"save@{self.global_steps}")
        folder = os.path.join(str(self.config.trainer.default_local_dir), f"global_step_{self.global_steps}")
        os.makedirs(os.path.join(folder, "actor"), exist_ok=True)

    def _load_checkpoint(self):
        # As VERL: resume_path loads that folder and takes its step number; auto would take the latest.
        t = self.config.trainer
        path = t.resume_from_path if t.resume_mode == "resume_path" else None
        self.calls.append(f"load:{t.resume_mode}:{os.path.basename(path) if path else ''}")
        if path:
            self.global_steps = int(path.split("global_step_")[-1])


async def test_verl_trainer_validates_through_the_store_and_logs_to_tracking(proxied, tmp_path):
    from scripted import ScriptedAgents, all_rollouts

    from agl_bridge.store.client import StoreClient

    store_address = proxied.address
    (tmp_path / "train.jsonl").write_text('{"rewards": [1.0, 0.0]}\n' * 4)
    (tmp_path / "val.jsonl").write_text('{"rewards": [1.0, 0.0]}\n{"rewards": [0.5]}\n{"rewards": [null]}\n')
    cfg = compose_config(
        [
            f"agl.store={store_address}",
            f"agl.train_dataset={tmp_path / 'train.jsonl'}",
            f"agl.val_dataset={tmp_path / 'val.jsonl'}",
            f"agl.proxy={store_address}/v1",
            "agl.resources_id=verl-val",
            "agl.rollout_timeout=60",
            "agl.collect_timeout=30",
            f"agl.summary={tmp_path / 'summary.json'}",
            "trainer.total_training_steps=2",
            "trainer.test_freq=1",
            "trainer.val_before_train=true",
            "trainer.balance_batch=false",
            f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "data.train_batch_size=2",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.rollout.val_kwargs.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    trainer = FakeAglTrainer(cfg)
    agents = ScriptedAgents(store_address, "verl-val")
    task = asyncio.create_task(agents.run())
    try:
        await trainer._fit()
        async with StoreClient(store_address) as client:
            rollouts = await all_rollouts(client)
        runs = list(agents.runs)
        # VERL's _validate hook outside fit: the same validation, metrics only.
        alone = await trainer._validate_async()
    finally:
        task.cancel()
    # Weights pushed to the (asleep) replicas before the first publication, as VERL's fit does; then per step, with
    # the proxy paused and drained around the swap; VERL's checkpoint (save_freq 10) only after the last step.
    assert trainer.calls[0] == "update_weights@0"
    assert trainer.calls.count("sleep") == 2 and trainer.calls[-3:] == ["update_weights@1", "resume", "save@2"]
    step = trainer.calls[trainer.calls.index("pause") :]
    assert step[:3] == ["pause", "drained", "sleep"] and step[step.index("update_weights@0") + 1] == "resume"
    assert not proxy_status(store_address)["paused"]
    # Validation before training and after each step (test_freq 1), logged with that step's metrics.
    assert [step for _, step in trainer.logged] == [0, 1, 2]
    for metrics, step in trainer.logged:
        # Per rollout: 1, 0 | 0.5, 0.5 | none (0), none (0): mean 2/6; best of 2: (1 + 0.5 + 0) / 3.
        assert metrics["val/n"] == 6 and metrics["val/reward_mean"] == pytest.approx(2 / 6)
        assert metrics["val/reward_best@2"] == pytest.approx(0.5)
        assert metrics["val/policy_version"] == step + 1
        assert ("actor/pg_loss" in metrics) == (step > 0)
    # VERL's val_kwargs default: greedy, from the val snapshot; training at rollout.temperature.
    val_runs = [r for r in runs if r["mode"] == "val"]
    assert len(val_runs) == 18 and {(r["resources_id"], r["temperature"]) for r in val_runs} == {("verl-val-val", 0.0)}
    train_runs = [r for r in runs if r["mode"] == "train"]
    assert {r["temperature"] for r in train_runs} == {float(cfg.actor_rollout_ref.rollout.temperature)}
    assert sorted(r.mode for r in rollouts) == [1] * 8 + [2] * 18
    assert alone["val/n"] == 6 and alone["val/reward_mean"] == pytest.approx(2 / 6)
    # agl.summary: the reward curve, as the local trainer's --summary writes it.
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["rewards"] == [pytest.approx(0.5)] * 2 and summary["final_reward"] == pytest.approx(0.5)
    assert summary["versions_published"] == [2, 3] and len(summary["validation"]) == 3
    assert alone["val/policy_version"] == 4  # published once more by the hook


# -- the weight swap behind the LLM proxy ----------------------------------------------------------------------


class LoopbackEngine:
    """A tiny OpenAI-compatible engine on loopback (``/v1/chat/completions``, with vLLM's token-id fields). It
    appends ``engine:<content>`` to ``events`` when a call arrives and ``engine-done:<content>`` just before it
    answers; a call whose last message is ``slow`` takes a second."""

    def __init__(self) -> None:
        self.events: list[str] = []
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                content = str(body.get("messages", [{}])[-1].get("content", ""))
                engine.events.append(f"engine:{content}")
                if content == "slow":
                    time.sleep(1.0)
                answer = {
                    "id": "cmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "tiny"),
                    "prompt_token_ids": [1, 2, 3],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                            "token_ids": [7],
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                }
                data = json.dumps(answer).encode()
                engine.events.append(f"engine-done:{content}")
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="loopback-engine", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxied:
    """``agl serve --memory --proxy --proxy-backend <engine>``: the store and the LLM proxy on one address."""

    def __init__(self, address: str, engine: LoopbackEngine) -> None:
        self.address, self.engine = address, engine


@pytest.fixture(scope="module")
def loopback_engine() -> Iterator[LoopbackEngine]:
    engine = LoopbackEngine()
    yield engine
    engine.close()


@pytest.fixture
def proxied(loopback_engine: LoopbackEngine) -> Iterator[Proxied]:
    loopback_engine.events = []
    with run_store_server("--proxy-backend", f"{loopback_engine.url}/v1", "--proxy-model", "tiny") as address:
        yield Proxied(address, loopback_engine)


def proxy_status(address: str) -> dict:
    with urllib.request.urlopen(f"{address}/proxy/status", timeout=10) as response:
        return json.loads(response.read())


def chat(address: str, content: str) -> int:
    """One chat completion through the proxy (not attributed to a rollout); the HTTP status."""
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": content}]}).encode()
    request = urllib.request.Request(
        f"{address}/v1/chat/completions", data=body, method="POST", headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        return response.status


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


async def wait_until_async(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def record_admin(backend: VerlBackend, events: list[str]) -> None:
    """Appends "pause" and "resume" to ``events`` as they are asked for, "drained" once the drain answered."""
    admin = backend.proxy
    assert admin is not None
    pause, drain, resume = admin.pause, admin.drain, admin.resume

    async def recorded_pause(*args, **kwargs):
        events.append("pause")
        return await pause(*args, **kwargs)

    async def recorded_drain(*args, **kwargs):
        answer = await drain(*args, **kwargs)
        events.append("drained")
        return answer

    async def recorded_resume(*args, **kwargs):
        events.append("resume")
        return await resume(*args, **kwargs)

    # Wrapped on this instance: the real routes still answer.
    vars(admin).update(pause=recorded_pause, drain=recorded_drain, resume=recorded_resume)


class HookedCheckpointManager:
    """VERL's checkpoint_manager stand-in, with a hook run inside ``sleep_replicas`` (on the update's thread)."""

    def __init__(self, calls: list[str], on_sleep: Callable[[], None] | None = None) -> None:
        self.calls, self.on_sleep = calls, on_sleep

    def sleep_replicas(self) -> None:
        self.calls.append("sleep")
        if self.on_sleep is not None:
            self.on_sleep()

    def update_weights(self, step: int) -> None:
        self.calls.append(f"update_weights@{step}")


def swap_config():
    return compose_config(
        [
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.rollout.n=3",
            "actor_rollout_ref.model.path=/models/tiny",
            "trainer.balance_batch=true",
        ]
    )


async def test_weights_are_pushed_with_the_proxy_paused_and_drained(proxied):
    address = proxied.address
    workers = FakeWorkers(swap_config())
    events = proxied.engine.events = workers.calls
    held: dict = {}

    def while_asleep() -> None:
        # Replicas asleep: the proxy is paused (calls wait) and nothing is in flight.
        state = proxy_status(address)
        held["state"] = (state["paused"], state["mode"], state["inFlight"])
        # A call made now is held by the proxy and reaches the engine only after the resume.
        thread = threading.Thread(target=lambda: held.setdefault("status", chat(address, "held")), daemon=True)
        held["thread"] = thread
        thread.start()
        wait_until(lambda: proxy_status(address)["waiting"] == 1)
        time.sleep(0.3)
        held["engine saw it while paused"] = "engine:held" in events

    workers.checkpoint_manager = HookedCheckpointManager(events, while_asleep)
    backend = VerlBackend(workers, proxy_url=f"{address}/v1", drain_timeout=10)
    record_admin(backend, events)
    # A slow call in flight when the step ends: the drain waits for it.
    slow = asyncio.create_task(asyncio.to_thread(chat, address, "slow"))
    await wait_until_async(lambda: "engine:slow" in events)
    await backend.before_update()
    metrics = await backend.update(make_batch())
    await backend.after_update()  # nothing left to resume
    held["thread"].join(10)
    assert await slow == 200 and held["status"] == 200
    assert held["state"] == (True, "wait", 0) and held["engine saw it while paused"] is False
    assert events == [
        "engine:slow",
        "pause",
        "engine-done:slow",
        "drained",
        "sleep",
        "balance",
        "old_log_prob[6]",
        "update_actor[6]",
        "update_weights@5",
        "resume",
        "engine:held",
        "engine-done:held",
    ]
    assert metrics["proxy/drained"] == 1.0 and metrics["proxy/in_flight_at_pause"] == 1.0
    assert 0.0 < metrics["timing_s/proxy_pause_drain"] < 10.0
    state = proxy_status(address)
    assert (state["paused"], state["waiting"], state["inFlight"]) == (False, 0, 0)


async def test_the_proxy_is_resumed_when_the_update_fails_is_cancelled_or_skipped(proxied):
    address = proxied.address
    workers = FakeWorkers(swap_config())
    events = workers.calls
    backend = VerlBackend(workers, proxy_url=f"{address}/v1", drain_timeout=10)
    record_admin(backend, events)

    # The actor update raises: the proxy is resumed, the error is what the caller sees.
    def broken(batch, metrics):
        raise RuntimeError("actor update failed")

    workers._update_actor = broken
    await backend.before_update()
    with pytest.raises(RuntimeError, match="actor update failed"):
        await backend.update(make_batch())
    assert events[:3] == ["pause", "drained", "sleep"] and events[-1] == "resume"
    assert not proxy_status(address)["paused"]
    del workers._update_actor

    # Cancelled (Ctrl-C) while the update runs on its thread: the proxy stays paused until the weights are pushed.
    release = threading.Event()
    workers.checkpoint_manager = HookedCheckpointManager(events, lambda: release.wait(10))
    events.clear()
    await backend.before_update()
    task = asyncio.create_task(backend.update(make_batch()))
    await wait_until_async(lambda: "sleep" in events)
    task.cancel()
    await asyncio.sleep(0.3)
    assert proxy_status(address)["paused"] and "resume" not in events
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events[-2:] == ["update_weights@5", "resume"] and not proxy_status(address)["paused"]

    # A step with nothing to train never calls update: the loop's after_update resumes the proxy.
    events.clear()
    await backend.before_update()
    assert proxy_status(address)["paused"]
    await backend.after_update()
    assert events == ["pause", "drained", "resume"] and not proxy_status(address)["paused"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_proxy_admin_urls_and_errors_name_what_to_check():
    assert admin_base_url("http://h:4748/v1") == "http://h:4748"
    assert admin_base_url("http://h:4748/v1/") == "http://h:4748"
    assert admin_base_url("http://h:4748") == "http://h:4748"
    assert admin_base_url("https://h/llm/v1?x=1") == "https://h/llm"
    with pytest.raises(ValueError, match="http"):
        admin_base_url("h:4748/v1")
    # Nothing listening: the message names the URL and the setting.
    port = _free_port()
    backend = VerlBackend(FakeWorkers(swap_config()), proxy_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProxyAdminError, match=rf"http://127\.0\.0\.1:{port} is unreachable.*agl\.proxy"):
        await backend.before_update()
    # A proxy with a token: without it 401 and a hint; with it the admin routes answer.
    with run_store_server("--proxy", "--token", "tok-1") as address:
        with pytest.raises(ProxyAdminError, match=r"401.*agl\.token"):
            await ProxyAdmin(f"{address}/v1").status()
        admin = ProxyAdmin(f"{address}/v1", "tok-1")
        assert (await admin.pause("wait"))["paused"] is True
        assert (await admin.drain(1.0))["drained"] is True
        assert (await admin.resume())["paused"] is False
    # A store without the proxy: 404, and what agl.proxy must be.
    with run_store_server() as address:
        with pytest.raises(ProxyAdminError, match=r"404.*agl LLM proxy"):
            await ProxyAdmin(f"{address}/v1").status()


# -- checkpoints: VERL's save_freq, and a resume after a kill ----------------------------------------------------


async def test_checkpoints_follow_save_freq_and_a_resume_trains_nothing_twice(proxied, tmp_path):
    from scripted import ScriptedAgents

    address = proxied.address
    (tmp_path / "train.jsonl").write_text('{"rewards": [1.0, 0.0]}\n' * 4)
    cfg = compose_config(
        [
            f"agl.store={address}",
            f"agl.proxy={address}/v1",
            f"agl.train_dataset={tmp_path / 'train.jsonl'}",
            "agl.resources_id=verl-ckpt",
            "agl.rollout_timeout=60",
            "agl.collect_timeout=30",
            "trainer.total_training_steps=4",
            "trainer.save_freq=2",
            "trainer.val_before_train=false",
            "trainer.balance_batch=false",
            f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "data.train_batch_size=2",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    loop_dir = tmp_path / "ckpt" / "agl"

    def history() -> list[dict]:
        return [json.loads(line) for line in (loop_dir / "history.jsonl").read_text().splitlines()]

    agents = asyncio.create_task(ScriptedAgents(address, "verl-ckpt").run())
    try:
        # First run: killed in the middle of the 4th step's actor update (VERL global step 3).
        first = FakeAglTrainer(cfg)
        first.fail_at = 3
        with pytest.raises(RuntimeError, match="killed"):
            await first._fit()
        latest_after_kill = (loop_dir / "latest").read_text()
        verl_record = json.loads((loop_dir / latest_after_kill / "verl.json").read_text())
        history_after_kill = history()
        paused_after_kill = proxy_status(address)["paused"]
        # Second run: resumes.
        second = FakeAglTrainer(cfg)
        await second._fit()
    finally:
        agents.cancel()
    # VERL's cadence: saved after step 2 (a multiple of save_freq) and never after 1 or 3; the loop checkpointed
    # with it, naming that VERL checkpoint.
    assert [c for c in first.calls if c.startswith("save")] == ["save@2"]
    assert latest_after_kill == "step-000002"
    assert verl_record == {"global_step": 2, "folder": str(tmp_path / "ckpt" / "global_step_2")}
    # Step 3 (index 2) was trained but not checkpointed; the crash in step 4 left the proxy running.
    assert [line["step"] for line in history_after_kill] == [0, 1, 2]
    assert paused_after_kill is False
    # The resume loads exactly that VERL checkpoint (not "latest"), and VERL's resume settings are left as they were.
    assert second.calls[0] == "load:resume_path:global_step_2" and second.calls[1] == "update_weights@2"
    assert (second.config.trainer.resume_mode, second.config.trainer.resume_from_path) == ("auto", None)
    # Steps 3 and 4 trained again (the lost step 3 on fresh rollouts), saved after the last one.
    assert [c for c in second.calls if c.startswith("save")] == ["save@4"]
    assert (loop_dir / "latest").read_text() == "step-000004"
    lines = history()
    assert [line["step"] for line in lines] == [0, 1, 2, 3]
    ids = [rid for line in lines for rid in line["rollout_ids"]]
    assert len(ids) == 16 and len(set(ids)) == 16, "a rollout was trained twice"
    assert set(lines[2]["rollout_ids"]).isdisjoint(history_after_kill[2]["rollout_ids"])

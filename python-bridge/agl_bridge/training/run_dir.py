"""``RunDirectory``: every file of a training run, in one folder (``LoopConfig.checkpoint_dir``):

- ``step-NNNNNN/`` checkpoints (the backend's weights and optimizer, ``state.json``: step, published version, triplet
  cursor, groups in flight, the last step's history line) and ``latest``, the name of the newest;
- ``history.jsonl``: one line per trained step, with the rollouts it trained on (and, asynchronously, dropped);
- ``pending.json``: the rollouts of the step being waited for, so a restarted trainer trains those, not fresh ones;
- ``inflight.json``: asynchronous mode's groups enqueued and not yet trained (``staleness.GroupLedger``);
- ``validation.jsonl``: one line per validation.

Every file is replaced atomically (written beside, then renamed), so a kill leaves the old one or the new one. A run
without a folder (``path`` None) keeps nothing: reads find nothing, writes do nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["Checkpoint", "RunDirectory", "record_ids", "write_json_atomic"]

HISTORY, PENDING, INFLIGHT, LATEST, VALIDATION, STATE = (
    "history.jsonl",
    "pending.json",
    "inflight.json",
    "latest",
    "validation.jsonl",
    "state.json",
)


def write_json_atomic(path: Path, obj: Any) -> None:
    """``path`` holds ``obj`` as JSON, replaced in one rename."""
    _write_text_atomic(path, json.dumps(obj))


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def record_ids(record: dict[str, Any]) -> set[str]:
    """The rollouts a ``history.jsonl`` line accounts for: trained, or dropped as too stale."""
    return {*record.get("rollout_ids", []), *record.get("dropped_rollout_ids", [])}


class Checkpoint:
    """A checkpoint folder and its ``state.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state: dict[str, Any] = json.loads((directory / STATE).read_text())


class RunDirectory:
    """The files of one run under ``path`` (None: a run that keeps none)."""

    def __init__(self, path: str | Path | None, *, keep_checkpoints: int = 2) -> None:
        self.path = Path(path) if path else None
        self.keep_checkpoints = keep_checkpoints

    def _file(self, name: str) -> Path | None:
        if self.path is None:
            return None
        self.path.mkdir(parents=True, exist_ok=True)
        return self.path / name

    def _existing(self, name: str) -> Path | None:
        if self.path is None or not (self.path / name).exists():
            return None
        return self.path / name

    def _read_json(self, name: str) -> Any:
        path = self._existing(name)
        return json.loads(path.read_text()) if path is not None else None

    def _write_json(self, name: str, obj: Any) -> None:
        path = self._file(name)
        if path is not None:
            write_json_atomic(path, obj)

    # -- checkpoints -------------------------------------------------------------------------------------------

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint, if any."""
        path = self._existing(LATEST)
        if path is None or self.path is None:
            return None
        return Checkpoint(self.path / path.read_text().strip())

    def save_checkpoint(self, step: int, write: Callable[[Path], None], state: dict[str, Any]) -> None:
        """Checkpoint ``step-{step}``: ``write(folder)`` fills it (the backend's weights), ``state`` (plus the time)
        goes to its ``state.json``; then ``latest`` names it and all but the newest ``keep_checkpoints`` go."""
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        name = f"step-{step:06d}"
        tmp = self.path / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        write(tmp)
        (tmp / STATE).write_text(json.dumps({**state, "time": time.time()}))
        final = self.path / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _write_text_atomic(self.path / LATEST, name)
        kept = sorted(p for p in self.path.glob("step-*") if p.is_dir())
        for old in kept[: -self.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    # -- history.jsonl -----------------------------------------------------------------------------------------

    def history(self) -> list[dict[str, Any]]:
        """The lines of ``history.jsonl``, oldest first."""
        path = self._existing(HISTORY)
        if path is None:
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def recorded_ids(self) -> set[str]:
        """Every rollout ``history.jsonl`` says was trained or dropped."""
        return {r for record in self.history() for r in record_ids(record)}

    def history_steps(self) -> set[int]:
        return {int(record["step"]) for record in self.history()}

    def append_history(self, record: dict[str, Any]) -> None:
        self._append(HISTORY, record)

    def truncate_history(self, step: int) -> int:
        """Drops the lines of steps ``step`` and later; returns how many it dropped."""
        records = self.history()
        kept = [r for r in records if int(r["step"]) < step]
        path = self._existing(HISTORY)
        if path is not None and len(kept) < len(records):
            _write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
        return len(records) - len(kept)

    def append_validation(self, record: dict[str, Any]) -> None:
        self._append(VALIDATION, record)

    def _append(self, name: str, record: dict[str, Any]) -> None:
        path = self._file(name)
        if path is not None:
            with path.open("a") as f:
                f.write(json.dumps(record) + "\n")

    # -- pending.json and inflight.json ------------------------------------------------------------------------

    def pending(self, step: int) -> list[str] | None:
        """The rollouts enqueued for ``step`` before a restart, if ``pending.json`` is that step's."""
        pending = self._read_json(PENDING)
        if pending is None or pending.get("step") != step:
            return None
        return [str(r) for r in pending["rollout_ids"]]

    def set_pending(self, step: int, rollout_ids: Iterable[str]) -> None:
        self._write_json(PENDING, {"step": step, "rollout_ids": list(rollout_ids)})

    def clear_pending(self) -> None:
        path = self._existing(PENDING)
        if path is not None:
            path.unlink()

    def inflight(self) -> dict[str, Any] | None:
        """The groups in flight ``inflight.json`` last recorded (``GroupLedger.state``)."""
        state = self._read_json(INFLIGHT)
        return state if isinstance(state, dict) else None

    def set_inflight(self, state: dict[str, Any]) -> None:
        self._write_json(INFLIGHT, state)

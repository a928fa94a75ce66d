"""Task inputs from files: what the trainers read their datasets from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["load_tasks"]


def _native(obj: Any) -> Any:
    """Parquet values (numpy arrays and scalars) as plain JSON values."""
    if isinstance(obj, np.ndarray):
        return [_native(x) for x in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Mapping):
        return {str(k): _native(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_native(x) for x in obj]
    return obj


def load_tasks(path: Any) -> list[Any]:
    """Task inputs from a JSONL file (one JSON value a line), a Parquet file (one row a task, as a dict: VERL's
    ``data.*_files``), or a list of such files."""
    if not isinstance(path, str):
        return [task for p in path for task in load_tasks(str(p))]
    if path.endswith(".parquet"):
        import pandas as pd

        return [_native(row) for row in pd.read_parquet(path).to_dict(orient="records")]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]

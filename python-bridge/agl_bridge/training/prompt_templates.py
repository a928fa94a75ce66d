"""Prompt templates the trainer publishes beside the policy (``LoopConfig.prompt_templates``): an agent whose prompt is
a template held as a resource (``resources.promptTemplate(name)``) reads it from the same snapshot as its LLM, so
the prompt a run trains with is recorded with every rollout's resources."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agl_bridge.errors import ConfigError
from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.store.convert import prompt_template_resource

__all__ = ["MAX_TEMPLATE_BYTES", "load_prompt_templates"]

# A template is a prompt, not a data set: a bound on what a snapshot carries.
MAX_TEMPLATE_BYTES = 256 * 1024


def load_prompt_templates(spec: Mapping[str, Any] | None) -> dict[str, types_pb2.Resource]:
    """``{name: file}`` as f-string prompt template resources, each file read once (at start)."""
    out: dict[str, types_pb2.Resource] = {}
    for name, file in (spec or {}).items():
        if not isinstance(name, str) or not name or not isinstance(file, str) or not file:
            raise ConfigError(f'prompt_templates: give {{"name": "file"}} pairs, got {name!r}: {file!r}')
        path = Path(file)
        try:
            size = path.stat().st_size
            if size > MAX_TEMPLATE_BYTES:
                raise ConfigError(f"prompt template {name!r}: {file} is {size} bytes, over {MAX_TEMPLATE_BYTES}")
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"prompt template {name!r}: cannot read {file}: {e}") from e
        # Files end with a newline; the template is what comes before it (a prompt ends where the model continues).
        out[name] = prompt_template_resource(text.rstrip("\n"))
    return out

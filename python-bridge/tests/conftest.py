"""Fixtures that run the real TypeScript store server (``node bin/agl.js serve --memory --port 0``) as a subprocess."""

from __future__ import annotations

import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

# python-bridge/tests/conftest.py -> the repository root.
REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = REPO_ROOT / "bin" / "agl.js"
# `agl serve --proxy` adds ", llm proxy" to the backend part of the ready line.
READY_LINE = re.compile(r"agl store listening on (https?://\S+) \(backend: memory(?:, tls)?(?:, llm proxy)?\)")
STARTUP_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class StoreServer:
    """A running store server: its address (``http://HOST:PORT``) and the token it requires, if any."""

    address: str
    token: str | None


@contextmanager
def run_store_server(*extra_args: str) -> Iterator[str]:
    """Starts ``node bin/agl.js serve --memory --port 0 [extra_args]`` from the repository root, waits for its
    ready line on stdout and yields the address; terminates it (SIGTERM, then SIGKILL) on exit."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the interop tests run the TypeScript store server")
    command = [node, str(SERVER_SCRIPT), "serve", "--memory", "--port", "0", *extra_args]
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as stderr_file:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            encoding="utf-8",
            errors="replace",
            # AGL_TOKEN would make the server require a token; only --token may set one here.
            env={**{k: v for k, v in os.environ.items() if k != "AGL_TOKEN"}, "NO_COLOR": "1"},
        )
        # Drain stdout on a thread for the server's whole life, so a chatty server never blocks on a full pipe.
        lines: queue.Queue[str | None] = queue.Queue()
        stdout_seen: list[str] = []

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        pump_thread = threading.Thread(target=pump, name="agl-server-stdout", daemon=True)
        pump_thread.start()

        def diagnostics(reason: str) -> str:
            stderr_file.seek(0)
            return (
                f"{reason}\ncommand: {' '.join(command)} (cwd {REPO_ROOT})\nexit code: {process.poll()}\n"
                f"--- stdout ---\n{''.join(stdout_seen)}--- stderr ---\n{stderr_file.read()}"
            )

        try:
            address = None
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while address is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    pytest.fail(diagnostics(f"store server printed no ready line within {STARTUP_TIMEOUT_S:.0f} s"))
                try:
                    line = lines.get(timeout=remaining)
                except queue.Empty:
                    continue
                if line is None:
                    process.wait(timeout=SHUTDOWN_TIMEOUT_S)
                    pytest.fail(diagnostics("store server exited before it was ready"))
                stdout_seen.append(line)
                match = READY_LINE.search(line)
                if match:
                    address = match.group(1)
            yield address
        finally:
            stop(process, pump_thread)


def stop(process: subprocess.Popen[str], pump_thread: threading.Thread) -> None:
    """SIGTERM, then SIGKILL after a grace period; closes stdout once the pump thread has read its end."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    pump_thread.join(timeout=5)
    if not pump_thread.is_alive() and process.stdout is not None:
        process.stdout.close()


@pytest.fixture
def store_server() -> Iterator[StoreServer]:
    """A fresh in-memory store server without authentication."""
    with run_store_server() as address:
        yield StoreServer(address=address, token=None)


@pytest.fixture
def store_address(store_server: StoreServer) -> str:
    """The address (``http://HOST:PORT``) of a fresh in-memory store server without authentication."""
    return store_server.address


@pytest.fixture
def token_store_server() -> Iterator[StoreServer]:
    """A fresh in-memory store server started with ``--token``: every call needs ``authorization: Bearer <token>``."""
    token = "test-" + secrets.token_hex(16)
    with run_store_server("--token", token) as address:
        yield StoreServer(address=address, token=token)

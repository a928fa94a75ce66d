"""An asyncio client for the agl LLM proxy's admin routes (``src/proxy/admin-routes.ts``), so a trainer can stop calls
from reaching the engines while it swaps their weights:

- ``GET /proxy/status``: ``paused``, ``mode``, ``inFlight`` (calls forwarded to an engine, not finished), ``waiting``
  (calls held by a pause), backends and counters;
- ``POST /proxy/pause`` ``{"mode": "wait"|"reject", "retry_after_seconds": n}``: new calls wait for the resume (or,
  ``reject``, get 429 with ``Retry-After``); calls in flight go on;
- ``POST /proxy/drain`` ``{"timeout_ms": n}``: answers once no call is in flight, with ``"drained": false`` if the
  timeout passed first;
- ``POST /proxy/resume``: the waiting calls go through, in arrival order.

Every answer is the status object (``drain`` adds ``drained``). With a token, every route needs ``authorization:
Bearer <token>`` — the token ``agl proxy --token`` (the store's) was started with.

The proxy is named by the URL its clients use — the OpenAI base ``http://host:4748/v1`` that ``agl.proxy`` and the
published ``proxy_llm`` resource carry — or by its root: the admin routes live at the root (``http://host:4748/proxy/
...``), so a trailing ``/v1`` is dropped (any other path prefix, such as one a reverse proxy adds, is kept). When the
proxy runs inside ``agl serve --proxy``, that root is the store's own address.

Plain ``urllib`` on a worker thread: no dependency beyond the standard library.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agl_bridge.errors import ConfigError, ProxyAdminError

__all__ = ["ProxyAdmin", "ProxyAdminError", "admin_base_url"]


def admin_base_url(proxy_url: str) -> str:
    """The root the admin routes hang off: ``proxy_url`` without query, fragment, trailing slashes and a final
    ``/v1``. ``http://h:4748/v1`` → ``http://h:4748``; ``http://h/llm/v1/`` → ``http://h/llm``."""
    parts = urlsplit(proxy_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"the LLM proxy URL must be http(s)://host[:port][/v1], got {proxy_url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class ProxyAdmin:
    """Pause, drain, resume and status of the LLM proxy at ``proxy_url`` (its OpenAI base URL or its root)."""

    def __init__(self, proxy_url: str, token: str | None = None, *, timeout: float = 10.0) -> None:
        self.base = admin_base_url(proxy_url)
        self.token = token or None
        self.timeout = timeout

    async def status(self) -> dict[str, Any]:
        return await self._request("GET", "/proxy/status")

    async def pause(self, mode: str = "wait", *, retry_after_seconds: float | None = None) -> dict[str, Any]:
        """Stops new calls from reaching the engines: ``wait`` holds them until ``resume`` (the proxy refuses one
        with 429 once it waited its ``pauseMaxWaitMs``, 300 s by default), ``reject`` answers 429 with
        ``Retry-After`` at once. Calls already in flight go on; ``drain`` waits for them."""
        if mode not in ("wait", "reject"):
            raise ConfigError(f'mode must be "wait" or "reject", got {mode!r}')
        body: dict[str, Any] = {"mode": mode}
        if retry_after_seconds is not None:
            body["retry_after_seconds"] = retry_after_seconds
        return await self._request("POST", "/proxy/pause", body)

    async def drain(self, timeout: float) -> dict[str, Any]:
        """Waits (at most ``timeout`` seconds) until no call is in flight; the status, with ``drained`` false when
        the timeout passed first."""
        return await self._request(
            "POST", "/proxy/drain", {"timeout_ms": max(0, round(timeout * 1000))}, timeout=timeout + self.timeout
        )

    async def resume(self) -> dict[str, Any]:
        return await self._request("POST", "/proxy/resume")

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self._request_sync, method, path, body, timeout or self.timeout)

    def _request_sync(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        url = self.base + path
        headers = {"accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace").strip()[:500]
            if error.code == 401:
                hint = (
                    "it wants the token it was started with (agl proxy --token, i.e. the store's): set agl.token "
                    "or AGL_TOKEN"
                    if not self.token
                    else "the token given (agl.token / AGL_TOKEN) is not the one it was started with"
                )
                raise ProxyAdminError(f"the LLM proxy refused {method} {url} (401): {hint}. {detail}") from None
            if error.code == 404:
                raise ProxyAdminError(
                    f"{method} {url} answered 404: is {self.base} an agl LLM proxy (agl proxy, or agl serve --proxy)? "
                    "agl.proxy must be its OpenAI base URL, e.g. http://host:4748/v1. "
                    f"{detail}"
                ) from None
            raise ProxyAdminError(f"the LLM proxy answered {error.code} to {method} {url}: {detail}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ProxyAdminError(
                f"the LLM proxy at {self.base} is unreachable ({method} {path}: {reason}): check that agl proxy (or "
                "agl serve --proxy) is running there and that agl.proxy names it (its OpenAI base URL, e.g. "
                "http://host:4748/v1)"
            ) from error
        try:
            answer = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ProxyAdminError(f"{method} {url} did not answer JSON: {raw[:200]!r}") from None
        if not isinstance(answer, dict):
            raise ProxyAdminError(f"{method} {url} answered {answer!r}, not a JSON object")
        return answer

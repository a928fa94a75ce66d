"""An OpenAI-compatible HTTP server for the local policy (aiohttp).

Serves ``/v1/chat/completions`` (chat template applied here) and ``/v1/completions`` (text or token-id prompts),
streaming or not, with vLLM ≥ 0.10.2's token fields: ``return_token_ids: true`` adds ``prompt_token_ids`` (streaming:
in the first chunk) and ``token_ids`` per choice (streaming: the new ids of each chunk); ``logprobs`` adds
chosen-token logprobs. ``system_fingerprint`` (and the ``x-agl-policy-version`` header) tell which weights answered.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import time
from collections import deque
from typing import Any

from aiohttp import web

from agl_bridge.local.policy import NO_CHAT_TEMPLATE, Generation, Policy
from agl_bridge.store.network import with_host

__all__ = ["PolicyServer"]

DEFAULT_MAX_TOKENS = 16


class _BadRequest(Exception):
    pass


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def _netloc(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class PolicyServer:
    """Serves ``policy`` under the model name ``model_name``. ``start`` returns the base URL (``http://host:port/v1``,
    with ``advertise_host`` as its host when given, ``https`` with ``ssl_context``)."""

    def __init__(
        self,
        policy: Policy,
        model_name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        advertise_host: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.policy = policy
        self.model_name = model_name
        self.host, self.port = host, port
        # The address consumers on other hosts dial (``host`` may be a wildcard or a local name); TLS when given.
        self.advertise_host = advertise_host
        self.ssl_context = ssl_context
        self.requests = 0
        self.generated_tokens = 0
        # The last samples served, (prompt ids, response ids): lets tests compare them with the training batch.
        self.sampled: deque[tuple[list[int], list[int]]] = deque(maxlen=4096)
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        # Set by a call the server can never answer (a chat call to a model without a chat template): whoever runs
        # the server stops the run on it (``wait_fatal``) rather than failing every rollout one by one.
        self.fatal_error: str | None = None
        self._vocab_cache: dict[str, int] | None = None
        self._fatal = asyncio.Event()
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        self.app = app

    async def start(self) -> str:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        sockets = site._server.sockets if site._server else []
        port = sockets[0].getsockname()[1] if sockets else self.port
        scheme = "https" if self.ssl_context is not None else "http"
        self.base_url = with_host(f"{scheme}://{_netloc(self.host)}:{port}/v1", self.advertise_host)
        return self.base_url

    def _vocab(self) -> dict[str, int]:
        # Built once: a 262k-token vocabulary takes a noticeable part of a second to build, on the event loop.
        if self._vocab_cache is None:
            self._vocab_cache = self.policy.tokenizer.get_vocab()
        return self._vocab_cache

    async def wait_fatal(self) -> str:
        """Returns the error of the first call the server can never answer (see ``fatal_error``)."""
        await self._fatal.wait()
        return self.fatal_error or ""

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- routes ------------------------------------------------------------------------------------------------

    async def _health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "policy_version": self.policy.weights_version})

    async def _models(self, _: web.Request) -> web.Response:
        model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "agl"}
        return web.json_response({"object": "list", "data": [model]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise _BadRequest("the body must be a JSON object")
            prompt_ids = self._prompt_ids(body, chat)
            params = self._sampling(body, len(prompt_ids))
        except (_BadRequest, json.JSONDecodeError, ValueError, TypeError) as error:
            return _error(400, str(error))
        self.requests += 1
        n = params.pop("n")
        version = self.policy.weights_version
        generations = list(await asyncio.gather(*(self.policy.generate(prompt_ids, **params) for _ in range(n))))
        self.generated_tokens += sum(len(g.token_ids) for g in generations)
        self.sampled.extend((prompt_ids, g.token_ids) for g in generations)
        want_ids = bool(body.get("return_token_ids"))
        want_logprobs = bool(body.get("logprobs")) if chat else body.get("logprobs") is not None
        meta = {
            "id": ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12),
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": f"agl-local-v{version}",
        }
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": sum(len(g.token_ids) for g in generations),
            "total_tokens": len(prompt_ids) + sum(len(g.token_ids) for g in generations),
        }
        headers = {"x-agl-policy-version": str(version)}
        if body.get("stream"):
            return await self._stream(
                request, chat, meta, generations, prompt_ids, want_ids, want_logprobs, body, usage, headers
            )
        choices = [self._choice(chat, i, g, want_ids, want_logprobs) for i, g in enumerate(generations)]
        answer: dict[str, Any] = {
            **meta,
            "object": "chat.completion" if chat else "text_completion",
            "choices": choices,
            "usage": usage,
        }
        if want_ids:
            answer["prompt_token_ids"] = prompt_ids
        return web.json_response(answer, headers=headers)

    # -- request parsing ---------------------------------------------------------------------------------------

    def _prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        if chat:
            if not self.policy.tokenizer.chat_template:
                self.fatal_error = f"a chat call reached model {self.model_name}, but {NO_CHAT_TEMPLATE}"
                self._fatal.set()
                raise _BadRequest(self.fatal_error)
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise _BadRequest("messages must be a non-empty list")
            plain = []
            for m in messages:
                if not isinstance(m, dict) or "role" not in m:
                    raise _BadRequest("each message needs a role")
                content = m.get("content") or ""
                if isinstance(content, list):  # content parts: keep the text ones
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                plain.append({"role": m["role"], "content": content})
            return self.policy.encode_chat(plain)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            vocab = len(self.policy.tokenizer)
            if any(t < 0 or t >= vocab for t in prompt):
                raise _BadRequest(f"prompt token ids must be in [0, {vocab})")
            return list(prompt)
        if isinstance(prompt, str) and prompt:
            return self.policy.encode_text(prompt)
        raise _BadRequest("prompt must be a non-empty string or a list of token ids")

    def _sampling(self, body: dict[str, Any], prompt_len: int) -> dict[str, Any]:
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or DEFAULT_MAX_TOKENS
        limit = getattr(self.policy.model.config, "max_position_embeddings", 2048) - prompt_len
        if limit <= 0:
            raise _BadRequest(f"the prompt ({prompt_len} tokens) fills the model's context")
        temperature = body.get("temperature")
        top_p = body.get("top_p")
        n = int(body.get("n") or 1)
        if not 1 <= n <= 16:
            raise _BadRequest("n must be between 1 and 16")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 8:
            raise _BadRequest("stop must be a non-empty string or a list of at most 8 of them")
        vocab = self._vocab()
        # A stop that is one token of the vocabulary stops on that id (a word-level vocabulary decodes with spaces
        # between words); every stop string also stops when the decoded answer contains it (vLLM's rule).
        stop_ids = {vocab[s.strip()] for s in stop if s.strip() in vocab}
        extra_ids = body.get("stop_token_ids") or []
        if not isinstance(extra_ids, list) or not all(isinstance(t, int) for t in extra_ids):
            raise _BadRequest("stop_token_ids must be a list of token ids")
        seed = body.get("seed")
        return {
            "max_tokens": max(1, min(int(max_tokens), limit)),
            "temperature": 1.0 if temperature is None else float(temperature),
            "top_p": 1.0 if top_p is None else float(top_p),
            "stop_ids": frozenset(stop_ids | set(extra_ids)),
            "stop_texts": tuple(stop),
            "seed": int(seed) if seed is not None else None,
            "n": n,
        }

    # -- answers -----------------------------------------------------------------------------------------------

    def _text(self, ids: list[int]) -> str:
        return self.policy.tokenizer.decode(ids, skip_special_tokens=True)

    def _answer_text(self, g: Generation) -> str:
        """The answer's text; a stop string ends it and is left out (the ids keep every sampled token)."""
        text = self._text(g.token_ids)
        return text[: text.find(g.stop_text)] if g.stop_text else text

    def _logprobs(self, chat: bool, ids: list[int], lps: list[float]) -> dict[str, Any]:
        # Each token's decoded text, as vLLM reports it (not the vocabulary's piece, "▁23" for " 23"): the dashboard
        # places the tokens over the answer's text with it.
        tokens = [self.policy.tokenizer.decode([t]) for t in ids]
        if chat:
            content = [
                {"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": []}
                for tok, lp in zip(tokens, lps, strict=True)
            ]
            return {"content": content}
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": None, "text_offset": None}

    def _choice(self, chat: bool, index: int, g: Generation, want_ids: bool, want_lps: bool) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "finish_reason": g.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": self._answer_text(g)}
        else:
            choice["text"] = self._answer_text(g)
        choice["logprobs"] = self._logprobs(chat, g.token_ids, g.logprobs) if want_lps else None
        if want_ids:
            choice["token_ids"] = g.token_ids
        return choice

    async def _stream(
        self,
        request: web.Request,
        chat: bool,
        meta: dict[str, Any],
        generations: list[Generation],
        prompt_ids: list[int],
        want_ids: bool,
        want_lps: bool,
        body: dict[str, Any],
        usage: dict[str, int],
        headers: dict[str, str],
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache", **headers}
        )
        await response.prepare(request)
        obj = "chat.completion.chunk" if chat else "text_completion"

        async def send(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
            chunk = {**meta, "object": obj, "choices": choices, **(extra or {})}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        first_extra = {"prompt_token_ids": prompt_ids} if want_ids else None
        if chat:
            await send(
                [
                    {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
                    for i in range(len(generations))
                ],
                first_extra,
            )
            first_extra = None
        for i, g in enumerate(generations):
            full = self._answer_text(g)
            for k, token in enumerate(g.token_ids):
                before, after = (min(len(self._text(g.token_ids[:j])), len(full)) for j in (k, k + 1))
                piece = full[before:after]
                last = k == len(g.token_ids) - 1
                choice: dict[str, Any] = {"index": i, "finish_reason": g.finish_reason if last else None}
                if chat:
                    choice["delta"] = {"content": piece}
                else:
                    choice["text"] = piece
                choice["logprobs"] = self._logprobs(chat, [token], [g.logprobs[k]]) if want_lps else None
                if want_ids:
                    choice["token_ids"] = [token]
                await send([choice], first_extra)
                first_extra = None
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], {"usage": usage})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

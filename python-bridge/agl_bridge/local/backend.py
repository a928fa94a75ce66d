"""The local backend of the training loop: the policy in this process, served by the policy server."""

from __future__ import annotations

from pathlib import Path

import torch
from verl import DataProto

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.local.policy import Policy
from agl_bridge.local.server import PolicyServer
from agl_bridge.store.convert import llm_resource

__all__ = ["LocalBackend"]

# Where a checkpoint keeps the KL loss's reference weights (``--kl-coef`` > 0).
REFERENCE_FILE = "reference.pt"


class LocalBackend:
    """Publishes the policy server (as ``llm_name``: a ``proxy_llm`` pointing at ``proxy_url`` when the agl LLM
    proxy fronts it, with the server itself as the ``llm`` named ``policy`` the proxy routes to; else an ``llm``)."""

    def __init__(
        self,
        policy: Policy,
        server: PolicyServer,
        *,
        llm_name: str = "main_llm",
        proxy_url: str | None = None,
        sampling: dict[str, object] | None = None,
    ) -> None:
        self.policy, self.server = policy, server
        self.llm_name, self.proxy_url = llm_name, proxy_url
        self.sampling = dict(sampling or {"temperature": 1.0})

    @property
    def pad_token_id(self) -> int:
        return int(self.policy.tokenizer.pad_token_id)

    def resources(self) -> dict[str, types_pb2.Resource]:
        model = self.server.model_name
        if self.proxy_url:
            return {
                self.llm_name: llm_resource(self.proxy_url, model, sampling_parameters=self.sampling, proxy=True),
                "policy": llm_resource(self.server.base_url, model, sampling_parameters=self.sampling),
            }
        return {self.llm_name: llm_resource(self.server.base_url, model, sampling_parameters=self.sampling)}

    async def start(self) -> None:
        # The policy server serves the weights in this process: nothing to push.
        return None

    async def before_update(self) -> None:
        # The update runs on the policy's thread after queued generations: nothing to drain.
        return None

    async def after_update(self) -> None:
        return None

    async def update(self, data: DataProto) -> dict[str, float]:
        return await self.policy.update(data)

    def save(self, directory: Path) -> None:
        self.policy.model.save_pretrained(directory / "model")
        self.policy.tokenizer.save_pretrained(directory / "model")
        torch.save(
            {"optimizer": self.policy.optimizer.state_dict(), "weights_version": self.policy.weights_version},
            directory / "optimizer.pt",
        )
        if self.policy.reference is not None:
            # The KL loss's reference: the weights RL started from, which a resumed run has no other record of.
            torch.save(self.policy.reference.state_dict(), directory / REFERENCE_FILE)

    def load(self, directory: Path) -> None:
        from transformers import AutoModelForCausalLM

        loaded = AutoModelForCausalLM.from_pretrained(
            str(directory / "model"), local_files_only=True, dtype=torch.float32
        )
        self.policy.load_weights(loaded.state_dict())
        state = torch.load(directory / "optimizer.pt", weights_only=False)
        self.policy.optimizer.load_state_dict(state["optimizer"])
        self.policy.weights_version = int(state.get("weights_version", 0))
        if (directory / REFERENCE_FILE).exists():
            self.policy.set_reference(torch.load(directory / REFERENCE_FILE, weights_only=True))

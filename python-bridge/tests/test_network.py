"""Across machines, from Python: the store client over mutual TLS with scoped tokens (the real TypeScript server),
the policy server over TLS publishing its advertised address, and the warning about loopback URLs published into a
store on another host. Certificates come from the machine's openssl."""

from __future__ import annotations

import asyncio
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest
from conftest import run_store_server

from agl_bridge.errors import StoreError
from agl_bridge.store.client import StoreClient
from agl_bridge.store.network import ClientTls, server_ssl_context, unreachable_warning, with_host


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory: Path) -> dict[str, str]:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate, as PEM files."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    files = {
        name: str(directory / f"{name}.pem")
        for name in ("ca", "ca-key", "server", "server-key", "client", "client-key")
    }
    _openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=test CA", "-keyout", files["ca-key"], "-out", files["ca"])
    for name, ext in (
        ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        (directory / f"{name}.ext").write_text(ext + "\n")
        csr = str(directory / f"{name}.csr")
        _openssl("req", "-new", *ec, "-subj", f"/CN={name}", "-keyout", files[f"{name}-key"], "-out", csr)
        _openssl(
            "x509", "-req", "-in", csr, "-CA", files["ca"], "-CAkey", files["ca-key"], "-CAcreateserial", "-days", "1",
            "-extfile", str(directory / f"{name}.ext"), "-out", files[name],
        )  # fmt: skip
    return files


async def test_store_client_mutual_tls_and_scoped_tokens(tmp_path: Path) -> None:
    pki = make_ca(tmp_path)
    tls_args = ["--tls-cert", pki["server"], "--tls-key", pki["server-key"], "--tls-client-ca", pki["ca"]]
    with run_store_server(*tls_args, "--token", "trainer=T", "--token", "runner=R") as address:
        assert address.startswith("https://127.0.0.1:")
        me = ClientTls(pki["ca"], pki["client"], pki["client-key"])
        async with StoreClient(address, "T", tls=me) as trainer:
            ids = await trainer.enqueue_rollouts([{"input": {"x": 1}}])
            assert len(ids) == 1
        async with StoreClient(address, "R", tls=me) as runner:
            with pytest.raises(StoreError) as denied:
                await runner.enqueue_rollouts([{"input": {"x": 1}}])
            assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert "needs scope trainer or admin" in denied.value.details
        async with StoreClient(address, "T", tls=ClientTls(pki["ca"]), timeout=5) as anonymous:
            with pytest.raises(StoreError) as refused:
                await anonymous.enqueue_rollouts([{"input": {"x": 1}}])
            assert refused.value.code == grpc.StatusCode.UNAVAILABLE


async def test_policy_server_over_tls_publishes_its_advertised_host(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from agl_bridge.local import tasks
    from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer
    from agl_bridge.local.policy import Policy
    from agl_bridge.local.server import PolicyServer

    pki = make_ca(tmp_path)
    tokenizer = build_word_tokenizer(tasks.vocabulary())
    model = build_tiny_model(tokenizer, TinyModelConfig(hidden_size=16, layers=1, heads=2, intermediate_size=32))
    server = PolicyServer(
        Policy(model, tokenizer),
        "tiny",
        "127.0.0.1",
        advertise_host="localhost",
        ssl_context=server_ssl_context(pki["server"], pki["server-key"]),
    )
    url = await server.start()
    try:
        assert url.startswith("https://localhost:") and url.endswith("/v1")
        context = ClientTls(pki["ca"]).ssl_context()

        body = await asyncio.to_thread(lambda: urllib.request.urlopen(f"{url}/models", context=context).read())
        assert b'"tiny"' in body
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.to_thread(lambda: urllib.request.urlopen(f"{url}/models", timeout=5).read())
    finally:
        await server.stop()


def test_loopback_urls_published_into_a_remote_store_are_warned_about() -> None:
    remote = "https://10.1.2.3:4747"
    warning = unreachable_warning("http://127.0.0.1:9000/v1", remote, "--advertise-host")
    assert warning is not None and "--advertise-host" in warning and "10.1.2.3" in warning
    assert unreachable_warning("http://localhost:9000/v1", remote, "--proxy") is not None
    assert unreachable_warning("http://[::1]:9000/v1", remote, "--proxy") is not None
    assert "wildcard" in (unreachable_warning("http://0.0.0.0:9000/v1", "http://127.0.0.1:4747", "--x") or "")
    assert unreachable_warning("http://127.0.0.1:9000/v1", "http://127.0.0.1:4747", "--x") is None
    assert unreachable_warning("http://10.1.2.9:9000/v1", remote, "--x") is None
    assert with_host("https://0.0.0.0:9000/v1", "10.1.2.9") == "https://10.1.2.9:9000/v1"
    assert with_host("http://127.0.0.1:9000/v1", None) == "http://127.0.0.1:9000/v1"

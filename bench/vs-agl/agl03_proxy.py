"""Agent Lightning v0.3's LLM proxy (LiteLLM) and its store server, as its trainer runs them, for bench/vs-agl/proxy.ts.

Runs in the venv that ``bench/vs-agl/setup.sh proxy`` makes: ``python agl03_proxy.py --engine URL --port N --store-port M``.
The store server (in-memory) runs in this process; the proxy in a child process (its default launch mode), sending
the spans of each call to the store server over OTLP/HTTP. Prints ``listening on URL`` (the proxy) once both answer,
then serves until SIGTERM or SIGINT, and stops the proxy and the store server before it exits (killed outright, it
would leave the proxy's process running, holding the pipes its parent reads, so the bench would never end).
"""

import argparse
import asyncio
import signal

from agentlightning import InMemoryLightningStore, LightningStoreServer, LLMProxy


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", required=True, help="the engine's OpenAI base URL, ending in /v1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store-port", type=int, required=True)
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args()
    store = LightningStoreServer(InMemoryLightningStore(), host="127.0.0.1", port=args.store_port)
    await store.start()
    model = {"model_name": args.model, "litellm_params": {"model": f"hosted_vllm/{args.model}", "api_base": args.engine}}
    proxy = LLMProxy(port=args.port, host="127.0.0.1", model_list=[model], store=store)
    await proxy.start()
    print(f"listening on http://127.0.0.1:{args.port}", flush=True)
    stopped = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stopped.set)
    await stopped.wait()
    await proxy.stop()
    await store.stop()


if __name__ == "__main__":
    asyncio.run(main())

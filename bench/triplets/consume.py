"""Reads every message of ``agl.v1.TripletService/StreamTriplets`` through the generated stubs and prints one JSON
line: rollouts, triplets, token ids and the seconds it took (the clock starts with the call)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import grpc.aio

from agl_bridge.gen.agl.v1 import triplets_pb2, triplets_pb2_grpc


async def main(address: str, mode: int) -> None:
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = triplets_pb2_grpc.TripletServiceStub(channel)
        request = triplets_pb2.StreamTripletsRequest(options=triplets_pb2.TripletOptions(mode=mode))
        rollouts = triplets = ids = 0
        start = time.perf_counter()
        async for message in stub.StreamTriplets(request):
            if not message.HasField("rollout"):
                continue
            rollouts += 1
            for t in message.rollout.triplets:
                triplets += 1
                # Touch the ids as a trainer would when it builds tensors.
                ids += len(t.prompt_token_ids) + len(t.response_token_ids)
        seconds = time.perf_counter() - start
    print(json.dumps({"rollouts": rollouts, "triplets": triplets, "ids": ids, "seconds": seconds}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1))

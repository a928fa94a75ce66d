"""Talking to the store and the LLM proxy: the asyncio gRPC client, value conversions, the ``agl.v1`` triplet messages
and the source that reads them, and the proxy's admin routes."""

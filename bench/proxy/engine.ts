/** The fake vLLM engine as its own process, for the proxy benchmark: prints its URL, runs until killed. */
import { startFakeVllm } from "../../test/support/fake-vllm.js";

const engine = await startFakeVllm({
  tokensPerChunk: Number(process.env.TOKENS_PER_CHUNK ?? 4),
  latencyMs: Number(process.env.ENGINE_LATENCY_MS ?? 0),
  policy: () => ({ content: "The quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps again." }),
});
process.stdout.write(`engine listening on ${engine.url}\n`);
process.on("SIGTERM", () => void engine.close().then(() => process.exit(0)));

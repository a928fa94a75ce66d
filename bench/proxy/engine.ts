/**
 * The fake vLLM engine as its own process, for the proxy benchmarks: prints its URL, runs until killed. Env:
 * TOKENS_PER_CHUNK, ENGINE_LATENCY_MS (before answering), CHUNK_DELAY_MS (between streamed chunks), ANSWER_CHARS.
 */
import { startFakeVllm } from "../../test/support/fake-vllm.js";

const sentence = "The quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps again.";
// ANSWER_CHARS: an answer of that many tokens (one a character), the sentence over and over.
const chars = Number(process.env.ANSWER_CHARS ?? sentence.length);
const content = sentence.repeat(Math.ceil(chars / sentence.length)).slice(0, chars);
const engine = await startFakeVllm({
  tokensPerChunk: Number(process.env.TOKENS_PER_CHUNK ?? 4),
  latencyMs: Number(process.env.ENGINE_LATENCY_MS ?? 0),
  chunkDelayMs: Number(process.env.CHUNK_DELAY_MS ?? 0),
  policy: () => ({ content }),
});
process.stdout.write(`engine listening on ${engine.url}\n`);
process.on("SIGTERM", () => void engine.close().then(() => process.exit(0)));

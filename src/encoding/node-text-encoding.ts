import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

let configured = false;

/**
 * Makes protobuf-es encode strings with Node's `Buffer.from`, which is 2–3× faster than `TextEncoder.encode` on
 * Node 20 (measured: 315 vs 678 ns for an 824-character string, 108 vs 350 ns for a 15-character id) and allocates
 * small results from Buffer's shared pool. Span payloads make string encoding a visible share of each RPC.
 * Idempotent; decoding and validation stay protobuf-es's own.
 */
export function useNodeTextEncoding(): void {
  if (configured) return;
  configured = true;
  const base = getTextEncoding();
  configureTextEncoding({ ...base, encodeUtf8: (text: string) => Buffer.from(text, "utf8") });
}

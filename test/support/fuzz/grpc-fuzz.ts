/**
 * Fuzzes a server's native gRPC side: grpc-js calls with raw bytes (serializers that pass Buffers through) to every
 * method path — random messages, mutated ones, random bytes, another method's message, unknown paths.
 */
import { fromBinary, toBinary, type DescMethod } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Client, credentials, Metadata, type StatusObject } from "@grpc/grpc-js";
import { acceptableCodes, type FuzzReport, fuzzedMethods, harvestIds, isSlowMethod, newReport, record, runCases } from "./fuzz-methods.js";
import { mutateBytes } from "./mutate.js";
import type { Prng } from "./prng.js";
import { createMessageGenerator, type IdPool } from "./random-message.js";

export interface FuzzOptions {
  /** `http://host:port`. */
  url: string;
  rng: Prng;
  ids: IdPool;
  /** Ids the fuzzer must never name (they are checked afterwards for being untouched). */
  protectedIds: ReadonlySet<string>;
  maxCases: number;
  /** Stops starting cases after this long. */
  maxMs: number;
  /** Calls in flight at once. Default 16. */
  concurrency?: number;
}

interface GrpcCase {
  index: number;
  method: DescMethod | undefined;
  path: string;
  kind: string;
  body: Buffer;
}

interface Answer {
  code: number;
  details: string;
  messages: Buffer[];
}

const identity = (b: Buffer) => b;

function makeCase(index: number, rng: Prng, gen: ReturnType<typeof createMessageGenerator>): GrpcCase {
  const method = rng.pick(fuzzedMethods);
  const path = `/${method.parent.typeName}/${method.name}`;
  const valid = () => toBinary(method.input, gen.message(method.input));
  const roll = rng.next();
  if (roll < 0.4) return { index, method, path, kind: "valid", body: Buffer.from(valid()) };
  if (roll < 0.75) return { index, method, path, kind: "mutated", body: Buffer.from(mutateBytes(rng, valid())) };
  if (roll < 0.85) return { index, method, path, kind: "random", body: Buffer.from(rng.bytes(rng.int(0, 200))) };
  if (roll < 0.88) return { index, method, path, kind: "empty", body: Buffer.alloc(0) };
  if (roll < 0.97) {
    const other = rng.pick(fuzzedMethods);
    return { index, method, path, kind: `foreign:${other.name}`, body: Buffer.from(toBinary(other.input, gen.message(other.input))) };
  }
  const bad = rng.pick([
    `/${method.parent.typeName}/Nope`,
    `/agl.v1.Nope/${method.name}`,
    `/${method.parent.typeName}/${method.name.toLowerCase()}`,
    "/",
  ]);
  return { index, method: undefined, path: bad, kind: "bad-path", body: Buffer.from(rng.bytes(rng.int(0, 40))) };
}

function call(client: Client, c: GrpcCase): Promise<Answer> {
  const streaming = c.method?.methodKind === "server_streaming";
  // Long-polls and watches end at the deadline (DEADLINE_EXCEEDED is a fine answer); short, so a batch is quick.
  const deadline = new Date(Date.now() + (isSlowMethod(c.method) ? 300 : 2_000));
  return new Promise((resolve) => {
    if (!streaming) {
      client.makeUnaryRequest(c.path, identity, identity, c.body, new Metadata(), { deadline }, (error, message) => {
        if (error) resolve({ code: error.code, details: error.details, messages: [] });
        else resolve({ code: 0, details: "", messages: message ? [message] : [] });
      });
      return;
    }
    const messages: Buffer[] = [];
    const stream = client.makeServerStreamRequest(c.path, identity, identity, c.body, new Metadata(), { deadline });
    stream.on("data", (m: Buffer) => messages.length < 20 && messages.push(m));
    // The final status comes as 'status'; 'error' repeats a failed one (and must be listened to).
    stream.on("error", () => {});
    stream.on("status", (status: StatusObject) => resolve({ code: status.code, details: status.details, messages }));
  });
}

function judge(report: FuzzReport, c: GrpcCase, answer: Answer, options: FuzzOptions | undefined): void {
  const label = `[grpc seed=${report.seed} case=${c.index}] ${c.path} (${c.kind}) input=${c.body.toString("base64").slice(0, 300)}`;
  if (answer.code !== 0) {
    const ok = acceptableCodes.has(answer.code as Code);
    record(report, Code[answer.code] ?? String(answer.code), ok ? undefined : `${label}: ${Code[answer.code]}: ${answer.details}`);
    return;
  }
  for (const bytes of answer.messages) {
    try {
      const output = fromBinary((c.method as DescMethod).output, bytes);
      if (options) harvestIds(output, options.ids, options.protectedIds);
    } catch (error) {
      record(report, "undecodable", `${label}: the answer does not decode: ${String(error)}`);
      return;
    }
  }
  record(report, "OK");
}

/** Runs up to `maxCases` cases (or `maxMs`); the report lists every unacceptable answer. */
export async function fuzzGrpc(options: FuzzOptions): Promise<FuzzReport> {
  const { rng } = options;
  const report = newReport(rng.seed);
  const gen = createMessageGenerator(rng, options.ids);
  const client = new Client(new URL(options.url).host, credentials.createInsecure(), {
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    "grpc.max_send_message_length": 64 * 1024 * 1024,
  });
  try {
    report.cases = await runCases(
      options,
      (index) => makeCase(index, rng, gen),
      (c) => isSlowMethod(c.method),
      (c) => call(client, c),
      (c, answer, harvest) => judge(report, c, answer, harvest ? options : undefined),
    );
  } finally {
    client.close();
  }
  return report;
}

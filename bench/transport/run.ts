/**
 * What one message of the span stream costs the server process, layer by layer. A grpc-js client sends
 * `AddSpansRequest`s one at a time on one bidi stream and waits for each answer (the standalone proxy's pattern: one
 * span of a proxied call a message), to five servers in turns, each one layer more of what the store does:
 * - `http2`: `node:http2` reading gRPC's length-prefixed frames and writing a 16-byte answer itself: the least a gRPC
 *   server on Node can spend;
 * - `grpc-js`: grpc-js (what the store serves gRPC with), the same answer, the bytes passed through;
 * - `adapter-raw`: agl's adapter on grpc-js (`addConnectService`) with an implementation that answers each request
 *   with its id; the requests not decoded (one constant message stands for each);
 * - `adapter`: the same, each request decoded;
 * - `agl`: the store server's own service for `AddSpansStream` (the well-formed pass, answers built as they
 *   complete) over a store that stores nothing.
 * Prints each server's CPU a message (the process's user + system time), the client's, and the round trip. What the
 * store spends a span beyond `agl` is storing it (`bench/proxy`, standalone). Runs from the sources (tsx).
 *
 * One more kind, `calls`, measures what a small unary call costs when it rides the store's `CallStream` (how agl's
 * TypeScript clients send every unary call: runners, the proxy, `agl train`): an `UpdateAttempt` without spans and its
 * 30 s deadline, through the store server's interceptors, answered by a store that does nothing. It runs in the turns
 * of the others; `--only calls` runs it alone.
 *
 *   npx tsx bench/transport/run.ts [--messages 10000] [--warmup 3000] [--rounds 3] [--only KIND] [--profile DIR]
 *
 * `--profile DIR` writes each server's V8 CPU profile there.
 */
import { fork } from "node:child_process";
import * as http2 from "node:http2";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { CallRequestSchema } from "../../src/gen/agl/v1/calls_pb.js";
import {
  AddSpansRequestSchema,
  AddSpansResponseSchema,
  LightningStore,
  UpdateAttemptRequestSchema,
} from "../../src/gen/agl/v1/store_pb.js";
import { AttemptSchema, AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { callSpan } from "../../src/proxy/call-span.js";
import { useNodeTextEncoding } from "../../src/encoding/node-text-encoding.js";
import { createCallStreamService } from "../../src/server/call-stream.js";
import { createErrorLoggingInterceptor } from "../../src/server/error-logging.js";
import { addConnectService } from "../../src/server/grpc-adapter.js";
import { type ServiceRegistration, serviceRegistration } from "../../src/server/service-registration.js";
import { createStoreServices } from "../../src/server/store-services.js";
import { addSpansStreamMethod } from "../../src/store/add-spans-stream.js";
import { decodeKeepingSpans } from "../../src/store/span-wire.js";
import type { StoreApi } from "../../src/store/store-api.js";

/** The servers, each one layer more of what the store does with a span message than the one before. */
const kinds = ["http2", "grpc-js", "adapter-raw", "adapter", "agl", "calls"] as const;
type Kind = (typeof kinds)[number];
const answer = Buffer.alloc(16, 7);
const identity = (b: Buffer) => b;

const path = (kind: Kind) =>
  kind === "http2" || kind === "grpc-js"
    ? "/bench.Echo/Stream"
    : kind === "calls"
      ? "/agl.v1.CallStream/Calls"
      : "/agl.v1.LightningStore/AddSpansStream";

/** The bidi method a server of `kind` serves, as grpc-js describes one: bytes in, bytes out. */
const bidiMethod = (kind: Kind) => ({
  path: path(kind),
  requestStream: true,
  responseStream: true,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});

function listen(server: grpc.Server): Promise<number> {
  return new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );
}

/**
 * agl's gRPC adapter (`addConnectService`, as the store server uses it) over `service`; `decoded: false` hands the
 * implementation one constant request rather than decoding each.
 */
function serveThroughAdapter(service: ServiceRegistration, decoded: boolean): Promise<number> {
  useNodeTextEncoding(); // as the store server does
  const server = new grpc.Server({ "grpc.max_receive_message_length": 16 << 20 });
  const constant = create(AddSpansRequestSchema, { id: 1 });
  addConnectService(server, service, decoded ? {} : { decodeRequest: () => constant });
  return listen(server);
}

/** The store's own service for `AddSpansStream` (the well-formed pass, answers built as they complete), storing nothing. */
function storeService(): ServiceRegistration {
  const store = { addSpansStream: addSpansStreamMethod(async () => create(AddSpansResponseSchema)) } as Partial<StoreApi>;
  return createStoreServices(store as StoreApi)[0] as ServiceRegistration;
}

/** The store server's `CallStream` over a store whose `UpdateAttempt` does nothing, with the server's interceptors. */
function callStreamService(): ServiceRegistration {
  const attempt = create(AttemptSchema, { rolloutId: "ro-0123456789ab", attemptId: "at-0123456789ab", status: AttemptStatus.SUCCEEDED });
  const store = { updateAttempt: async () => attempt } as Partial<StoreApi>;
  return createCallStreamService({
    services: createStoreServices(store as StoreApi),
    interceptors: [createErrorLoggingInterceptor()],
    maxMessageBytes: 16 << 20,
    decodeRequest: decodeKeepingSpans,
  });
}

/** An implementation that answers each request with its id and does nothing else. */
const echoService = serviceRegistration(LightningStore, {
  async *addSpansStream(requests) {
    for await (const request of requests) yield { id: request.id };
  },
});

function serveGrpcJs(): Promise<number> {
  const server = new grpc.Server({ "grpc.max_receive_message_length": 16 << 20 });
  server.addService(
    { Stream: bidiMethod("grpc-js") },
    {
      Stream: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        call.on("data", () => call.write(answer));
        call.on("end", () => call.end());
      },
    },
  );
  return listen(server);
}

function serveHttp2(): Promise<number> {
  const framed = Buffer.alloc(5 + answer.length);
  framed.writeUInt32BE(answer.length, 1);
  answer.copy(framed, 5);
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    let pending: Buffer = Buffer.alloc(0);
    stream.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const size = pending.readUInt32BE(1);
        if (pending.length < 5 + size) break;
        pending = pending.subarray(5 + size);
        stream.write(framed);
      }
    });
    stream.on("end", () => stream.end());
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

if (process.argv[2] === "serve") {
  const kind = process.argv[3] as Kind;
  const port = await (kind === "http2"
    ? serveHttp2()
    : kind === "grpc-js"
      ? serveGrpcJs()
      : serveThroughAdapter(
          kind === "agl" ? storeService() : kind === "calls" ? callStreamService() : echoService,
          kind !== "adapter-raw",
        ));
  process.on("message", () => process.send?.(process.cpuUsage()));
  // Exits rather than dies, so that a `--cpu-prof` profile is written.
  process.on("SIGTERM", () => process.exit(0));
  process.send?.({ port });
} else {
  const { values: args } = parseArgs({
    options: {
      messages: { type: "string", default: "10000" },
      rounds: { type: "string", default: "3" },
      warmup: { type: "string", default: "3000" },
      only: { type: "string" },
      profile: { type: "string" },
    },
  });
  if (args.only !== undefined && !kinds.includes(args.only as Kind)) throw new Error(`--only takes one of ${kinds.join(", ")}`);
  const spanMessage = Buffer.from(toBinary(AddSpansRequestSchema, create(AddSpansRequestSchema, { spans: [proxySpan()], id: 1 })));
  const update = create(UpdateAttemptRequestSchema, {
    rolloutId: "ro-0123456789ab",
    attemptId: "at-0123456789ab",
    status: AttemptStatus.SUCCEEDED,
  });
  const callMessage = Buffer.from(
    toBinary(
      CallRequestSchema,
      create(CallRequestSchema, {
        id: 1,
        method: "agl.v1.LightningStore/UpdateAttempt",
        request: toBinary(UpdateAttemptRequestSchema, update),
        timeoutMs: 30_000,
      }),
    ),
  );
  const clientFor = (kind: Kind) => grpc.makeGenericClientConstructor({ Stream: { ...bidiMethod(kind), originalName: "stream" } }, "Echo");

  const measure = async (kind: Kind) => {
    const profile = args.profile ? ["--cpu-prof", "--cpu-prof-interval=100", `--cpu-prof-dir=${args.profile}`] : [];
    const server = fork(new URL(import.meta.url).pathname, ["serve", kind], { execArgv: [...process.execArgv, ...profile] });
    const ask = <T>() => new Promise<T>((resolve) => server.once("message", (m) => resolve(m as T)));
    const { port } = await ask<{ port: number }>();
    const stub = new (clientFor(kind))(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const call = (stub as unknown as { stream(): grpc.ClientDuplexStream<Buffer, Buffer> }).stream();
    let answered: (() => void) | undefined;
    call.on("data", () => answered?.());
    const roundTrip = () =>
      new Promise<void>((resolve) => {
        answered = resolve;
        call.write(kind === "calls" ? callMessage : spanMessage);
      });
    for (let i = 0; i < Number(args.warmup); i++) await roundTrip();
    server.send("cpu");
    const before = await ask<NodeJS.CpuUsage>();
    const clientBefore = process.cpuUsage();
    const times: number[] = [];
    const n = Number(args.messages);
    for (let i = 0; i < n; i++) {
      const start = performance.now();
      await roundTrip();
      times.push(performance.now() - start);
    }
    const client = process.cpuUsage(clientBefore);
    server.send("cpu");
    const after = await ask<NodeJS.CpuUsage>();
    const ended = new Promise((resolve) => call.once("status", resolve));
    call.end();
    await ended;
    stub.close();
    server.kill();
    const cpuUs = (after.user - before.user + after.system - before.system) / n;
    times.sort((a, b) => a - b);
    const percentile = (q: number) => times[Math.min(times.length - 1, Math.floor((q / 100) * times.length))] as number;
    console.log(
      `${kind.padEnd(11)} server CPU ${cpuUs.toFixed(1).padStart(6)} µs a message ` +
        `(user ${((after.user - before.user) / n).toFixed(1)}, system ${((after.system - before.system) / n).toFixed(1)}); ` +
        `client CPU ${((client.user + client.system) / n).toFixed(1)} µs; round trip p50 ${percentile(50).toFixed(3)} ms, p99 ${percentile(99).toFixed(3)} ms`,
    );
  };
  console.log(
    `${args.messages} AddSpansRequests of ${spanMessage.length} bytes (one span of a proxied call), one at a time on one ` +
      `stream, after ${args.warmup}; calls: CallRequests of ${callMessage.length} bytes (an UpdateAttempt)`,
  );
  for (let round = 1; round <= Number(args.rounds); round++) {
    for (const kind of round % 2 === 1 ? kinds : [...kinds].reverse()) if (!args.only || kind === args.only) await measure(kind);
  }
}

/** A span as the proxy records one call of `bench/proxy` (~800 prompt and ~85 response token ids, logprobs, bodies). */
function proxySpan() {
  const ids = (n: number) => Array.from({ length: n }, (_, i) => (i * 7919) % 32_000);
  const content = "word ".repeat(60);
  return callSpan({
    scope: { rolloutId: "ro-0123456789ab", attemptId: "at-0123456789ab" },
    kind: "chat",
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    parentId: "",
    request: { model: "policy", temperature: 1 },
    requestText: JSON.stringify({ model: "policy", messages: [{ role: "user", content: "word ".repeat(300) }] }),
    api: "chat",
    clientRequestText: undefined,
    extraAttributes: undefined,
    stream: false,
    startTime: 1_764_900_000,
    endTime: 1_764_900_000.0004,
    timeToFirstByteMs: 0.3,
    backendEndpoint: "http://127.0.0.1:8000/v1",
    resourcesId: "rs-0123456789ab",
    resourcesVersion: 1,
    tries: 1,
    httpStatus: 200,
    completion: {
      promptIds: ids(800),
      responseIds: ids(85),
      logprobs: ids(85).map((i) => -i / 1e5),
      responseId: "chatcmpl-0123456789",
      model: "policy",
      finishReasons: ["stop"],
      inputTokens: 800,
      outputTokens: 85,
      body: { id: "chatcmpl-0123456789", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content } }] },
    },
    error: undefined,
  });
}

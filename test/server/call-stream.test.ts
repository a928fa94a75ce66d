/**
 * CallStream: unary calls as messages of one stream, on a real server over a real socket. Raw streams check what the
 * server answers (per-call authorization, errors, deadlines, cancels); the store client checks that its calls ride
 * on the stream, keep their deadlines and aborts, and fall back to plain calls on a server without it.
 */
import { create, fromBinary, type DescMessage, type MessageInitShape, toBinary, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Client, Code, ConnectError, createClient, type HandlerContext } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CallStreamTransportOptions, withCallStream } from "../../src/client/call-stream-transport.js";
import { createGrpcJsTransport } from "../../src/client/grpc-js-transport.js";
import { createStoreClient } from "../../src/client/store-client.js";
import { createCredentials } from "../../src/core/credentials.js";
import { CallStream, type CallRequest, CallRequestSchema, type CallResponse } from "../../src/gen/agl/v1/calls_pb.js";
import {
  DequeueRolloutsRequestSchema,
  DequeueRolloutsResponseSchema,
  EnqueueRolloutsRequestSchema,
  EnqueueRolloutsResponseSchema,
  GetRolloutRequestSchema,
  LightningStore,
  WaitForRolloutsRequestSchema,
} from "../../src/gen/agl/v1/store_pb.js";
import { RolloutMode } from "../../src/gen/agl/v1/types_pb.js";
import { ExportTraceServiceRequestSchema, TraceService } from "../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import { serviceRegistration } from "../../src/server/service-registration.js";
import { startTestServer, type TestServer } from "./helpers.js";

const store = (method: string) => `agl.v1.LightningStore/${method}`;
const call = <T extends DescMessage>(id: number, method: string, schema: T, request: MessageInitShape<T>, timeoutMs = 0) =>
  create(CallRequestSchema, { id, method, request: toBinary(schema, create(schema, request)), timeoutMs });

/** Sends `requests` on one CallStream, then `later` once `after` answers are in, and collects `expect` answers. */
async function exchange(
  server: TestServer,
  token: string | undefined,
  requests: CallRequest[],
  options: { expect?: number; later?: CallRequest[]; after?: number } = {},
): Promise<CallResponse[]> {
  const expected = options.expect ?? requests.length;
  const client = createClient(CallStream, createGrpcTransport({ baseUrl: server.server.url }));
  const answers: CallResponse[] = [];
  let wake: (() => void) | undefined;
  const until = async (count: number) => {
    while (answers.length < count) await new Promise<void>((resolve) => (wake = resolve));
  };
  const input = (async function* () {
    yield* requests;
    if (options.later) {
      await until(options.after ?? 0);
      yield* options.later;
    }
    await until(expected);
  })();
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  for await (const answer of client.calls(input, { headers })) {
    answers.push(answer);
    wake?.();
    if (answers.length >= expected) break;
  }
  return answers;
}

describe("CallStream on the server", () => {
  let server: TestServer;
  const tokens = { runner: "runner-token-1234567890", trainer: "trainer-token-1234567890" };
  beforeAll(async () => {
    server = await startTestServer({
      credentials: createCredentials([
        { token: tokens.runner, scope: "runner" },
        { token: tokens.trainer, scope: "trainer" },
      ]),
    });
  });
  afterAll(() => server.close());

  it("answers each call as its unary call would, by id", async () => {
    const answers = await exchange(server, tokens.trainer, [
      call(7, store("EnqueueRollouts"), EnqueueRolloutsRequestSchema, {
        rollouts: [{ mode: RolloutMode.TRAIN }, { mode: RolloutMode.VAL }],
      }),
      call(8, store("GetRollout"), GetRolloutRequestSchema, { rolloutId: "ro-missing" }),
    ]);
    const byId = new Map(answers.map((a) => [a.id, a]));
    const enqueued = fromBinary(EnqueueRolloutsResponseSchema, byId.get(7)?.response ?? new Uint8Array());
    expect(enqueued.rollouts.map((r) => r.mode)).toEqual([RolloutMode.TRAIN, RolloutMode.VAL]);
    expect(byId.get(7)?.errorCode).toBe(0);
    expect(byId.get(8)?.errorCode).toBe(Code.NotFound);
    expect(byId.get(8)?.errorMessage).toMatch(/ro-missing/);
  });

  it("authorizes every call by its own method's scope", async () => {
    await server.store.enqueueRollouts({ rollouts: [{}] });
    const answers = await exchange(server, tokens.runner, [
      call(1, store("EnqueueRollouts"), EnqueueRolloutsRequestSchema, { rollouts: [{}] }),
      call(2, store("DequeueRollouts"), DequeueRolloutsRequestSchema, { workerId: "w1" }),
    ]);
    const byId = new Map(answers.map((a) => [a.id, a]));
    expect(byId.get(1)?.errorCode).toBe(Code.PermissionDenied);
    expect(byId.get(1)?.errorMessage).toMatch(/EnqueueRollouts needs scope trainer/);
    expect(byId.get(2)?.errorCode).toBe(0);
    expect(fromBinary(DequeueRolloutsResponseSchema, byId.get(2)?.response ?? new Uint8Array()).rollouts).toHaveLength(1);
  });

  it("refuses the stream without a token", async () => {
    const failed = exchange(server, undefined, [call(1, store("GetRollout"), GetRolloutRequestSchema, { rolloutId: "x" })]);
    await expect(failed).rejects.toMatchObject({ code: Code.Unauthenticated });
  });

  it("answers an unknown method, a streaming one and undecodable bytes with an error, and goes on", async () => {
    const answers = await exchange(server, tokens.trainer, [
      create(CallRequestSchema, { id: 1, method: "agl.v1.LightningStore/NoSuchMethod" }),
      create(CallRequestSchema, { id: 2, method: "agl.v1.TripletService/StreamTriplets" }),
      create(CallRequestSchema, { id: 3, method: store("GetRollout"), request: new Uint8Array([0x0a, 0xff]) }),
      call(4, store("EnqueueRollouts"), EnqueueRolloutsRequestSchema, { rollouts: [{}] }),
    ]);
    const byId = new Map(answers.map((a) => [a.id, a]));
    expect(byId.get(1)?.errorCode).toBe(Code.Unimplemented);
    expect(byId.get(1)?.errorMessage).toMatch(/NoSuchMethod.*not a unary method/);
    expect(byId.get(2)?.errorCode).toBe(Code.Unimplemented);
    expect(byId.get(3)?.errorCode).toBe(Code.InvalidArgument);
    expect(byId.get(3)?.errorMessage).toMatch(/cannot decode agl.v1.GetRolloutRequest/);
    expect(byId.get(4)?.errorCode).toBe(0);
  });

  it("ends a call at its deadline, and a cancelled one at once, without ending the stream", async () => {
    const [rollout] = (await server.store.enqueueRollouts({ rollouts: [{}] })).rollouts;
    const rolloutIds = [rollout?.rolloutId as string];
    const started = Date.now();
    const answers = await exchange(
      server,
      tokens.trainer,
      [
        call(1, store("WaitForRollouts"), WaitForRolloutsRequestSchema, { rolloutIds, timeoutSeconds: 30 }, 200),
        call(2, store("WaitForRollouts"), WaitForRolloutsRequestSchema, { rolloutIds, timeoutSeconds: 30 }),
      ],
      {
        expect: 3,
        after: 1,
        later: [
          create(CallRequestSchema, { id: 2, cancel: true }),
          call(3, store("GetRollout"), GetRolloutRequestSchema, { rolloutId: "x" }),
        ],
      },
    );
    const byId = new Map(answers.map((a) => [a.id, a]));
    expect(byId.get(1)?.errorCode).toBe(Code.DeadlineExceeded);
    expect(byId.get(2)?.errorCode).toBe(Code.Canceled);
    expect(byId.get(3)?.errorCode).toBe(Code.NotFound);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe("CallStream's deadlines", () => {
  it("ends each call at its own deadline, the earliest first, and never a call whose deadline is far off or absent", async () => {
    // Export here waits for its signal alone: only the stream's deadline can end it.
    const waitForAbort = (_request: unknown, ctx: HandlerContext) =>
      new Promise<never>((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true }));
    const server = await startTestServer({ extraServices: [serviceRegistration(TraceService, { export: waitForAbort })] });
    const exportCall = (id: number, timeoutMs: number) =>
      call(id, "opentelemetry.proto.collector.trace.v1.TraceService/Export", ExportTraceServiceRequestSchema, {}, timeoutMs);
    try {
      const started = performance.now();
      const answers = await exchange(
        server,
        undefined,
        // The second call's deadline comes before the first's; the third's is past what a Node timer can wait.
        [exportCall(1, 400), exportCall(2, 100), exportCall(3, 0xffff_ffff), exportCall(4, 0)],
        {
          expect: 4,
          after: 2,
          later: [create(CallRequestSchema, { id: 3, cancel: true }), create(CallRequestSchema, { id: 4, cancel: true })],
        },
      );
      expect(performance.now() - started).toBeGreaterThanOrEqual(400);
      expect(answers.map((a) => [a.id, a.errorCode])).toEqual([
        [2, Code.DeadlineExceeded],
        [1, Code.DeadlineExceeded],
        [3, Code.Canceled],
        [4, Code.Canceled],
      ]);
    } finally {
      await server.close();
    }
  });
});

/**
 * Runs `test` with a client of a fresh server over {@link withCallStream} (with `options`), whose inner grpc-js
 * transport counts the unary and streaming calls it makes.
 */
async function withCountedClient(
  options: CallStreamTransportOptions,
  test: (client: Client<typeof LightningStore>, used: { unary: number; stream: number }) => Promise<void>,
): Promise<void> {
  const server = await startTestServer();
  const grpcJs = createGrpcJsTransport({ address: server.address });
  const used = { unary: 0, stream: 0 };
  const transport = withCallStream(
    {
      unary(...args) {
        used.unary++;
        return grpcJs.unary(...args);
      },
      stream(...args) {
        used.stream++;
        return grpcJs.stream(...args);
      },
    },
    options,
  );
  try {
    await test(createClient(LightningStore, transport), used);
  } finally {
    transport.close();
    grpcJs.close();
    await server.close();
  }
}

describe("the store client over CallStream", () => {
  it("sends its unary calls on one stream, keeping deadlines and aborts", async () => {
    const server = await startTestServer();
    const client = createStoreClient({ baseUrl: server.server.url });
    try {
      const { rollouts } = await client.enqueueRollouts({ rollouts: [{ input: { q: 1 } }, { input: { q: 2 } }] });
      const got = await Promise.all(rollouts.map((r) => client.getRollout({ rolloutId: r.rolloutId })));
      expect(got.map((r) => r.input && toJson(ValueSchema, r.input))).toEqual([{ q: 1 }, { q: 2 }]);
      await expect(client.getRollout({ rolloutId: "ro-missing" })).rejects.toMatchObject({ code: Code.NotFound });

      const waited = client.waitForRollouts({ rolloutIds: [rollouts[0]?.rolloutId as string], timeoutSeconds: 30 }, { timeoutMs: 150 });
      await expect(waited).rejects.toMatchObject({ code: Code.DeadlineExceeded });
      const abort = new AbortController();
      const aborted = client.waitForRollouts(
        { rolloutIds: [rollouts[0]?.rolloutId as string], timeoutSeconds: 30 },
        { signal: abort.signal },
      );
      setTimeout(() => abort.abort(), 50);
      await expect(aborted).rejects.toMatchObject({ code: Code.Canceled });
      // A deadline further off than a Node timer can wait does not end the call at once, here or in the store.
      const far = await client.waitForRollouts(
        { rolloutIds: [rollouts[0]?.rolloutId as string], timeoutSeconds: 0.2 },
        { timeoutMs: 2 ** 32 },
      );
      expect(far.rollouts).toEqual([]);
      // The stream goes on after both.
      expect((await client.getRollout({ rolloutId: rollouts[1]?.rolloutId as string })).rolloutId).toBe(rollouts[1]?.rolloutId);
    } finally {
      client.close();
      await server.close();
    }
  });

  it("carries concurrent calls on one stream, ends it when idle, and sends large requests as calls of their own", () =>
    withCountedClient({ idleMs: 100, maxRequestBytes: 4096 }, async (client, used) => {
      const { rollouts } = await client.enqueueRollouts({ rollouts: Array.from({ length: 20 }, () => ({})) });
      const got = await Promise.all(rollouts.map((r) => client.getRollout({ rolloutId: r.rolloutId })));
      expect(got.map((r) => r.rolloutId)).toEqual(rollouts.map((r) => r.rolloutId));
      expect(used).toEqual({ unary: 0, stream: 1 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await client.getRollout({ rolloutId: rollouts[0]?.rolloutId as string });
      expect(used).toEqual({ unary: 0, stream: 2 });
      await client.enqueueRollouts({ rollouts: [{ metadata: { blob: "x".repeat(10_000) } }] });
      expect(used).toEqual({ unary: 1, stream: 2 });
    }));

  it("sends calls beyond its cap on the stream as calls of their own", () =>
    withCountedClient({ maxInFlight: 2 }, async (client, used) => {
      const { rollouts } = await client.enqueueRollouts({ rollouts: Array.from({ length: 5 }, () => ({})) });
      used.unary = 0;
      const got = await Promise.all(rollouts.map((r) => client.getRollout({ rolloutId: r.rolloutId })));
      expect(got.map((r) => r.rolloutId)).toEqual(rollouts.map((r) => r.rolloutId));
      expect(used).toEqual({ unary: 3, stream: 1 });
    }));

  it("falls back to plain calls on a server without CallStream", async () => {
    const server = await startTestServer({ callStream: false });
    const client = createStoreClient({ baseUrl: server.server.url });
    try {
      const first = Promise.all([client.enqueueRollouts({ rollouts: [{}] }), client.enqueueRollouts({ rollouts: [{}] })]);
      expect((await first).map((r) => r.rollouts.length)).toEqual([1, 1]);
      expect((await client.queryRollouts({})).rollouts).toHaveLength(2);
    } finally {
      client.close();
      await server.close();
    }
  });

  it("settles the calls in flight when the server goes away, and later calls fail with UNAVAILABLE", async () => {
    const server = await startTestServer({ shutdownGraceMs: 100 });
    const client = createStoreClient({ baseUrl: server.server.url, maxTries: 1 });
    try {
      await client.queryRollouts({});
      // The server ends waits as it shuts down (an empty claim), or the stream's end fails the call.
      const settled = client.dequeueRollouts({ workerId: "w", waitSeconds: 20 }).then(
        (r) => r.rollouts.length,
        (error) => ConnectError.from(error).code,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      await server.close();
      expect([0, Code.Unavailable]).toContain(await settled);
      await expect(client.getRollout({ rolloutId: "x" })).rejects.toMatchObject({ code: Code.Unavailable });
    } finally {
      client.close();
    }
  });
});

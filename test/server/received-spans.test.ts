/**
 * Spans sent over gRPC are stored in the bytes they arrived in (src/store/span-wire.ts), through the real server and
 * a real SQLite file: the `data` column holds the client's own bytes, with an assigned sequence id appended, and reads
 * return the spans exactly.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import * as grpc from "@grpc/grpc-js";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AddSpansResponseSchema, UpdateAttemptRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import { AttemptStatus, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { handWrittenSpan } from "../support/hand-written-span.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore, type Store } from "../../src/store/store.js";

const identity = (bytes: Buffer) => bytes;

describe("spans over gRPC are stored as received (SQLite)", () => {
  let dir: string;
  let store: Store;
  let server: StoreServer;
  let client: grpc.Client;

  const call = (method: string, request: Uint8Array) =>
    new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(`/agl.v1.LightningStore/${method}`, identity, identity, Buffer.from(request), (error, response) =>
        error ? reject(error) : resolve(response!),
      ),
    );
  const storedData = (spanId: string) => {
    const db = new Database(join(dir, "store.db"), { readonly: true });
    try {
      return db.prepare("SELECT data FROM spans WHERE span_id = ?").pluck().get(spanId) as Buffer;
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agl-received-spans-"));
    store = createStore({ backend: createSqliteBackend({ path: join(dir, "store.db") }) });
    server = await startStoreServer({ port: 0, store });
    client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client.close();
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("AddSpans: the client's bytes, plus the sequence id the store assigned", async () => {
    const rollout = await store.startRollout({});
    const [rolloutId, attemptId] = [rollout.rolloutId, rollout.latestAttempt!.attemptId];
    // Fields in reverse order and an unknown one: bytes no encoder of ours writes.
    const spanBytes = (spanId: string, sequenceId: number) =>
      handWrittenSpan({ rolloutId, attemptId, spanId, name: "tool.call", sequenceId });
    const explicit = spanBytes("1".repeat(16), 500);
    const assigned = spanBytes("2".repeat(16), 0);
    const request = new BinaryWriter();
    for (const span of [explicit, assigned]) request.tag(1, WireType.LengthDelimited).bytes(span);

    const { acks } = fromBinary(AddSpansResponseSchema, await call("AddSpans", request.finish()));
    expect(acks.map((ack) => [ack.sequenceId, ack.duplicate])).toEqual([
      [500, false],
      [501, false],
    ]);

    expect(Buffer.from(storedData("1".repeat(16)))).toEqual(Buffer.from(explicit));
    const sequenceField = new BinaryWriter().tag(3, WireType.Varint).uint32(501).finish();
    expect(Buffer.from(storedData("2".repeat(16)))).toEqual(Buffer.concat([assigned, sequenceField]));

    const { spans } = await store.querySpans({ rolloutId });
    expect(spans.map((s) => [s.spanId, s.sequenceId, s.name])).toEqual([
      ["1".repeat(16), 500, "tool.call"],
      ["2".repeat(16), 501, "tool.call"],
    ]);
    // The unknown field survives, as it would have through a decode and encode.
    expect(Buffer.from(toBinary(SpanSchema, spans[1]!)).includes(Buffer.from("from a newer client"))).toBe(true);
  });

  it("UpdateAttempt with spans: stored as received, and the attempt finishes", async () => {
    const rollout = await store.startRollout({});
    const [rolloutId, attemptId] = [rollout.rolloutId, rollout.latestAttempt!.attemptId];
    const spans = ["3", "4"].map((c) => ({ rolloutId, attemptId, spanId: c.repeat(16), name: "llm.call" }));
    const request = toBinary(
      UpdateAttemptRequestSchema,
      create(UpdateAttemptRequestSchema, { rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans }),
    );
    await call("UpdateAttempt", request);

    const stored = await store.querySpans({ rolloutId });
    expect(stored.spans.map((s) => [s.spanId, s.sequenceId])).toEqual([
      ["3".repeat(16), 1],
      ["4".repeat(16), 2],
    ]);
    for (const span of stored.spans) {
      const expected = toBinary(SpanSchema, create(SpanSchema, { ...spans.find((s) => s.spanId === span.spanId)!, sequenceId: 0 }));
      // The canonical encoding as sent (no sequence id), then the assigned one.
      expect(Buffer.from(storedData(span.spanId)).subarray(0, expected.length)).toEqual(Buffer.from(expected));
    }
    expect((await store.getRollout({ rolloutId })).latestAttempt?.status).toBe(AttemptStatus.SUCCEEDED);
  });
});

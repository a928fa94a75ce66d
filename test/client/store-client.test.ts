/**
 * The TypeScript client against a real server on a socket: the lifecycle over grpc-js, deadlines (longer for
 * long-polls), retries only for calls that are safe to repeat, the token, TLS, and the connect-node protocols.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { writeSelfSignedCert } from "../support/self-signed-cert.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, TemplateEngine } from "../../src/gen/agl/v1/types_pb.js";
import { startTestServer, type TestServer } from "../server/helpers.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(options: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
  const t = await startTestServer(options);
  cleanups.push(() => t.close());
  return t;
}

function client(options: Parameters<typeof createStoreClient>[0]): StoreClient {
  const c = createStoreClient(options);
  cleanups.push(() => c.close());
  return c;
}

async function codeOf(promise: Promise<unknown>): Promise<Code> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error).code;
  }
  throw new Error("the call succeeded");
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe("store client", () => {
  it("runs the rollout lifecycle over gRPC with typed messages", async () => {
    const t = await serve();
    const store = client({ baseUrl: t.server.url });
    const { rollouts } = await store.enqueueRollouts({ rollouts: [{ metadata: { task: 7 } }] });
    const [claimed] = (await store.dequeueRollouts({ workerId: "w1" })).rollouts;
    expect(claimed?.rolloutId).toBe(rollouts[0]?.rolloutId);
    const attempt = await store.updateAttempt({
      rolloutId: claimed!.rolloutId,
      attemptId: "latest",
      status: AttemptStatus.SUCCEEDED,
      spans: [{ rolloutId: claimed!.rolloutId, attemptId: claimed!.latestAttempt!.attemptId, spanId: "s1", name: "step" }],
    });
    expect(attempt.status).toBe(AttemptStatus.SUCCEEDED);
    const done = await store.waitForRollouts({ rolloutIds: [claimed!.rolloutId], timeoutSeconds: 5 });
    expect(done.rollouts.map((r) => r.status)).toEqual([RolloutStatus.SUCCEEDED]);
    expect(done.rollouts[0]?.metadata).toEqual({ task: 7 });
    expect((await store.querySpans({ rolloutId: claimed!.rolloutId })).spans.map((s) => s.name)).toEqual(["step"]);
  });

  it("takes plain JSON wherever the contract holds a Value (input, JSON resources), keeping the typed form, on every protocol", async () => {
    const t = await serve();
    for (const protocol of ["grpc", "connect", "grpc-web"] as const) {
      const store = client({ baseUrl: t.server.url, protocol });
      const inputs: JsonValue[] = [
        { question: "2+2?", choices: [3, 4], nested: { ok: true, none: null } },
        "plain text",
        42,
        null,
        [1, "two"],
        {},
      ];
      const { rollouts } = await store.enqueueRollouts({ rollouts: inputs.map((input) => ({ input, metadata: { protocol } })) });
      const stored = await Promise.all(rollouts.map((r) => store.getRollout({ rolloutId: r.rolloutId })));
      expect(
        stored.map((r) => toJson(ValueSchema, r.input!)),
        protocol,
      ).toEqual(inputs);
      expect(stored[0]?.metadata).toEqual({ protocol });
      // The typed forms: a Value message, and a Value init object.
      const typed = await store.startRollout({ rollout: { input: fromJson(ValueSchema, { typed: 1 }) } });
      expect(toJson(ValueSchema, typed.input!)).toEqual({ typed: 1 });
      const init = await store.updateRollout({ rolloutId: typed.rolloutId, input: { kind: { case: "stringValue", value: "x" } } });
      expect(toJson(ValueSchema, init.input!)).toBe("x");
      const updated = await store.updateRollout({ rolloutId: typed.rolloutId, input: { step: 2 } });
      expect(toJson(ValueSchema, updated.input!)).toEqual({ step: 2 });
      // A JSON resource, beside a typed one.
      const published = await store.addResources({
        resources: {
          config: { kind: { case: "json", value: { temperature: 0.7, stop: ["\n"] } } },
          prompt: { kind: { case: "promptTemplate", value: { template: "Q: {q}", engine: TemplateEngine.F_STRING } } },
        },
      });
      const latest = await store.getLatestResources({});
      expect(latest.resources?.resourcesId).toBe(published.resourcesId);
      const config = latest.resources?.resources.config?.kind;
      expect(config?.case === "json" && toJson(ValueSchema, config.value)).toEqual({ temperature: 0.7, stop: ["\n"] });
      // What JSON cannot carry is refused before anything is sent.
      const refused = await store
        .enqueueRollouts({ rollouts: [{ input: { when: 10n } as never }] })
        .catch((e: unknown) => ConnectError.from(e));
      expect(refused).toMatchObject({
        code: Code.InvalidArgument,
        rawMessage: expect.stringMatching(/^rollouts\[0\]\.input: not a JSON value/),
      });
    }
  });

  it("gives long-polls a deadline beyond their server-side wait", async () => {
    const t = await serve();
    const store = client({ baseUrl: t.server.url, timeoutMs: 100 });
    const started = Date.now();
    const { rollouts } = await store.dequeueRollouts({ waitSeconds: 0.5 });
    expect(rollouts).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    const { rolloutId } = (await store.startRollout({})).latestAttempt!;
    expect((await store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 0.3 })).rollouts).toEqual([]);
  });

  it("ends a call at its own timeoutMs with DEADLINE_EXCEEDED", async () => {
    const t = await serve();
    const store = client({ baseUrl: t.server.url });
    const { rolloutId } = await store.startRollout({});
    const started = Date.now();
    expect(await codeOf(store.waitForRollouts({ rolloutIds: [rolloutId] }, { timeoutMs: 200 }))).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("retries reads while the server is unavailable, but never a write", async () => {
    const port = await freePort();
    const store = client({ baseUrl: `http://127.0.0.1:${port}` });
    const started = Date.now();
    expect(await codeOf(store.enqueueRollouts({ rollouts: [{}] }))).toBe(Code.Unavailable);
    expect(Date.now() - started).toBeLessThan(1_000);

    // The server comes up while the read is being retried.
    const pending = store.getLatestResources({});
    await new Promise((resolve) => setTimeout(resolve, 300));
    await serve({ port });
    expect((await pending).resources).toBeUndefined();
    expect(await store.getStatistics({})).toMatchObject({ totalRollouts: 0 });
  });

  it("sends the bearer token, from the options or AGL_TOKEN", async () => {
    const t = await serve({ token: "s3cret" });
    expect(await codeOf(client({ baseUrl: t.server.url, token: "" }).getStatistics({}))).toBe(Code.Unauthenticated);
    expect(await codeOf(client({ baseUrl: t.server.url, token: "wrong" }).getStatistics({}))).toBe(Code.Unauthenticated);
    expect((await client({ baseUrl: t.server.url, token: "s3cret" }).getStatistics({})).backend).toBe("memory");
    process.env.AGL_TOKEN = "s3cret";
    cleanups.push(() => delete process.env.AGL_TOKEN);
    expect((await client({ baseUrl: t.server.url }).getStatistics({})).backend).toBe("memory");
  });

  it("speaks Connect JSON and gRPC-Web over HTTP/1.1 too", async () => {
    const t = await serve();
    for (const protocol of ["connect", "grpc-web"] as const) {
      const store = client({ baseUrl: t.server.url, protocol });
      const { rollouts } = await store.enqueueRollouts({ rollouts: [{ groupId: protocol }] });
      const found = await store.queryRollouts({ groupId: protocol });
      expect(found.rollouts.map((r) => r.rolloutId)).toEqual(rollouts.map((r) => r.rolloutId));
      expect(await codeOf(store.getRollout({ rolloutId: "ro-missing" }))).toBe(Code.NotFound);
    }
  });

  it("connects over TLS, trusting a given certificate authority", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-client-tls-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeSelfSignedCert(dir);
    const t = await serve({ tls: { cert: readFileSync(join(dir, "cert.pem")), key: readFileSync(join(dir, "key.pem")) } });
    expect(t.server.url.startsWith("https://")).toBe(true);
    const store = client({ baseUrl: t.server.url, caFile: join(dir, "cert.pem") });
    expect((await store.getStatistics({})).backend).toBe("memory");
    const json = client({ baseUrl: t.server.url, caFile: join(dir, "cert.pem"), protocol: "connect" });
    expect((await json.getStatistics({})).backend).toBe("memory");
  });
});

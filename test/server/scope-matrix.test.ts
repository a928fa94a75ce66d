/**
 * Scoped credentials: every RPC of the served services and every plain HTTP route (OTLP, the LLM proxy's calls and
 * admin routes), called with a token of every scope, is allowed or refused with PERMISSION_DENIED / 403 exactly as the
 * table in docs/running-the-store.md says. The RPC list comes from the generated service descriptors, so a new RPC
 * without a documented scope fails here.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCredentials, SCOPES, type Scope } from "../../src/core/credentials.js";
import { RPC_SCOPES } from "../../src/core/rpc-scopes.js";
import { CallStream } from "../../src/gen/agl/v1/calls_pb.js";
import { ResourceService } from "../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { TripletService } from "../../src/gen/agl/v1/triplets_pb.js";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createOtlpTracesHandler } from "../../src/otlp/otlp-route.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { routeRequest } from "../../src/proxy/proxy-routes.js";
import { PROXY_ROUTE_SCOPES } from "../../src/proxy/route-scopes.js";
import { createUiHandler } from "../../src/server/ui-handler.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { repoRoot, startTestServer, type TestServer } from "./helpers.js";

const tokens: Record<Scope, string> = { runner: "tok-runner", trainer: "tok-trainer", reader: "tok-reader", admin: "tok-admin" };
const services: DescService[] = [LightningStore, ResourceService, TripletService, CallStream];

/** The documented table: row label → the scopes besides admin (the words of the cell before any ';'). */
function documentedScopes(): Map<string, Scope[]> {
  const text = readFileSync(join(repoRoot, "docs/running-the-store.md"), "utf8");
  const section = text.slice(text.indexOf("### Scoped tokens"));
  const rows = new Map<string, Scope[]>();
  for (const line of section.split("\n")) {
    const m = /^\| (.+?) \| (.+?) \|$/.exec(line);
    if (!m || m[1] === "RPC or route" || m[1]?.startsWith("---")) continue;
    const words = (m[2]?.split(";")[0] ?? "").split(/[ ,]+/);
    rows.set(
      m[1]?.replace(/^`([^`]+)`$/, "$1") ?? "",
      words.filter((w): w is Scope => (SCOPES as readonly string[]).includes(w)),
    );
  }
  return rows;
}

let t: TestServer;
let store: Store;
let proxy: LlmProxy;
let uiDir: string;
beforeAll(async () => {
  uiDir = mkdtempSync(join(tmpdir(), "agl-scopes-ui-"));
  writeFileSync(join(uiDir, "index.html"), "<!doctype html><title>agl</title>");
  const credentials = createCredentials(SCOPES.map((scope) => ({ scope, token: tokens[scope] })));
  store = createStore({ backend: createMemoryBackend() });
  // An engine nobody listens on: allowed calls fail upstream (502), never with 401 or 403.
  proxy = createLlmProxy({ store, credentials, backends: [{ endpoint: "http://127.0.0.1:9/v1", model: "m" }], maxRetries: 0 });
  const ui = createUiHandler({ dir: uiDir, next: (req, res) => proxy.handle(req, res) });
  t = await startTestServer({ store, credentials, fallback: createOtlpTracesHandler({ store, credentials, next: ui }) });
});
afterAll(async () => {
  await proxy?.close();
  await t?.close();
  await store?.close();
  rmSync(uiDir, { recursive: true, force: true });
});

let transport: ReturnType<typeof createGrpcTransport> | undefined;

/** The gRPC code a call with `token` ends with (OK when it succeeded), whatever the request did. */
async function rpcCode(method: DescMethod, token: string | undefined, request: object = {}): Promise<Code | "ok"> {
  transport ??= createGrpcTransport({ baseUrl: t.server.url });
  const client = createClient(method.parent, transport) as unknown as Record<string, (req: object, opts: object) => unknown>;
  // Streams that are allowed wait for news: their deadline passes, which counts as allowed.
  const opts = {
    timeoutMs: method.methodKind === "server_streaming" ? 300 : 3_000,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  };
  try {
    // A bidi stream (AddSpansStream) gets the request as a stream of one, and is read to its first answer.
    const bidi = method.methodKind === "bidi_streaming";
    const input = bidi
      ? (async function* () {
          yield request;
        })()
      : request;
    const result = client[method.localName]?.(input, opts);
    if (method.methodKind === "server_streaming" || bidi) {
      for await (const _ of result as AsyncIterable<unknown>) break;
    } else await result;
    return "ok";
  } catch (error) {
    const e = ConnectError.from(error);
    if (e.code === Code.PermissionDenied) expect(e.rawMessage).toMatch(/needs scope .*admin; this token has scope/);
    return e.code;
  }
}

const allowed = (code: Code | "ok") => code !== Code.PermissionDenied && code !== Code.Unauthenticated;

describe("scope matrix: RPCs", () => {
  const methods = services.flatMap((s) => s.methods);
  const documented = documentedScopes();

  it("documents every RPC of the served services, and the code's table matches the docs", () => {
    const names = methods.map((m) => `${m.parent.typeName}/${m.name}`);
    expect(names.filter((n) => !documented.has(n))).toEqual([]);
    expect(Object.keys(RPC_SCOPES).sort()).toEqual([...names].sort());
    for (const name of names) expect(RPC_SCOPES[name]?.scopes, name).toEqual(documented.get(name));
  });

  it("allows or denies every RPC for every scope as documented", async () => {
    const seen: string[] = [];
    for (const method of methods) {
      const name = `${method.parent.typeName}/${method.name}`;
      const expected = documented.get(name) ?? [];
      for (const scope of SCOPES) {
        const code = await rpcCode(method, tokens[scope]);
        const ok = scope === "admin" || expected.includes(scope);
        seen.push(`${name} ${scope}: ${allowed(code) === ok ? "as documented" : `code ${Code[code as Code] ?? code}`}`);
        if (!ok) expect(code, `${name} ${scope}`).toBe(Code.PermissionDenied);
      }
      expect(await rpcCode(method, undefined), name).toBe(Code.Unauthenticated);
      expect(await rpcCode(method, "not-a-token"), name).toBe(Code.Unauthenticated);
    }
    expect(seen.filter((line) => !line.endsWith("as documented"))).toEqual([]);
  }, 60_000);

  it("lets a runner hand a rollout back (status REQUEUING) and nothing else through UpdateRollout", async () => {
    const update = LightningStore.method.updateRollout;
    const { rollouts } = await store.enqueueRollouts({ rollouts: [{}] });
    const rolloutId = rollouts[0]?.rolloutId ?? "";
    expect(await rpcCode(update, tokens.runner, { rolloutId, status: RolloutStatus.REQUEUING })).not.toBe(Code.PermissionDenied);
    expect(await rpcCode(update, tokens.runner, { rolloutId, status: RolloutStatus.CANCELLED })).toBe(Code.PermissionDenied);
    expect(await rpcCode(update, tokens.runner, { rolloutId, status: RolloutStatus.REQUEUING, metadata: { a: 1 } })).toBe(
      Code.PermissionDenied,
    );
    expect(await rpcCode(update, tokens.trainer, { rolloutId, status: RolloutStatus.CANCELLED })).toBe("ok");
  });
});

describe("scope matrix: HTTP routes", () => {
  const documented = documentedScopes();
  const rowOf = (label: string) => {
    const key = [...documented.keys()].find((k) => k.startsWith(label));
    if (key === undefined) throw new Error(`docs/running-the-store.md has no row starting with ${label}`);
    return documented.get(key) ?? [];
  };
  const routes: { method: string; path: string; body?: string; row: string }[] = [
    { method: "POST", path: "/v1/traces", body: "{}", row: "`POST /v1/traces`" },
    { method: "POST", path: "/v1/chat/completions", body: '{"messages":[{"role":"user","content":"hi"}]}', row: "LLM proxy: `POST" },
    { method: "POST", path: "/v1/completions", body: '{"prompt":"hi"}', row: "LLM proxy: `POST" },
    { method: "POST", path: "/rollout/ro-x/attempt/at-x/v1/chat/completions", body: "{}", row: "LLM proxy: `POST" },
    { method: "POST", path: "/v1/responses", body: '{"input":"hi"}', row: "LLM proxy: `POST" },
    { method: "POST", path: "/v1/messages", body: '{"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}', row: "LLM proxy: `POST" },
    { method: "POST", path: "/v1/messages/count_tokens", body: '{"messages":[]}', row: "LLM proxy: `POST" },
    { method: "GET", path: "/v1/models", row: "LLM proxy: `GET" },
    { method: "GET", path: "/proxy/status", row: "LLM proxy: `/proxy/" },
    { method: "POST", path: "/proxy/pause", body: '{"mode":"reject"}', row: "LLM proxy: `/proxy/" },
    { method: "POST", path: "/proxy/resume", body: "", row: "LLM proxy: `/proxy/" },
    { method: "POST", path: "/proxy/drain", body: '{"timeout_ms":10}', row: "LLM proxy: `/proxy/" },
  ];
  const call = async (route: (typeof routes)[number], token: string | undefined) => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`${t.server.url}${route.path}`, {
      method: route.method,
      headers,
      ...(route.body === undefined ? {} : { body: route.body }),
    });
    return { status: res.status, text: await res.text() };
  };

  it("covers every kind of proxy route, and the code's table matches the docs", () => {
    const kinds = new Set(routes.map((r) => routeRequest(r.method, r.path)?.kind).filter((k) => k !== undefined));
    expect([...kinds].sort()).toEqual(Object.keys(PROXY_ROUTE_SCOPES).sort());
    for (const r of routes) {
      const kind = routeRequest(r.method, r.path)?.kind as keyof typeof PROXY_ROUTE_SCOPES | undefined;
      if (kind) expect(PROXY_ROUTE_SCOPES[kind], r.path).toEqual(rowOf(r.row));
    }
  });

  it("allows or denies every route for every scope as documented (401 without a token, 403 naming the scope)", async () => {
    for (const route of routes) {
      const expected = rowOf(route.row);
      for (const scope of SCOPES) {
        const { status, text } = await call(route, tokens[scope]);
        const ok = scope === "admin" || expected.includes(scope);
        if (ok) expect([401, 403], `${route.method} ${route.path} ${scope}: ${text}`).not.toContain(status);
        else {
          expect(status, `${route.method} ${route.path} ${scope}`).toBe(403);
          expect(text).toMatch(/needs scope .*admin; this token has scope/);
        }
      }
      expect((await call(route, undefined)).status, route.path).toBe(401);
    }
    await call(routes[10] as (typeof routes)[number], tokens.admin);
  }, 60_000);

  it("leaves health and the dashboard's files open", async () => {
    expect((await fetch(`${t.server.url}/healthz`)).status).toBe(200);
    const page = await fetch(`${t.server.url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<title>agl</title>");
  });
});

describe("a single --token", () => {
  it("is admin: it may call what every scope may", async () => {
    const single = await startTestServer({ token: "only" });
    try {
      const client = createClient(LightningStore, createGrpcTransport({ baseUrl: single.server.url }));
      const headers = { authorization: "Bearer only" };
      await client.enqueueRollouts({ rollouts: [{}] }, { headers });
      await client.dequeueRollouts({}, { headers });
      await client.updateWorker({ workerId: "w" }, { headers });
      expect((await client.getStatistics({}, { headers })).totalRollouts).toBe(1);
    } finally {
      await single.close();
    }
  });
});

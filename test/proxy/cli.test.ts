/** `agl serve --proxy` (one port for store, triplets and proxy) and `agl proxy` (its own port), as real processes. */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { attrInts, attrNumber, attrString } from "../../src/adapter/attributes.js";
import { AGL_LLM_RESOURCES_ID, AGL_LLM_RESOURCES_VERSION, AGL_LLM_RESPONSE_TOKEN_IDS } from "../../src/core/semconv.js";
import type { StreamTripletsResponse } from "../../src/gen/agl/v1/triplets_pb.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { createTripletClient } from "../../src/triplets/triplet-client.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { postJson } from "../support/proxy-harness.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Spawns `agl <args>` and resolves with the URL of its "listening on" line. */
async function startAgl(args: string[]): Promise<{ url: string; line: string; child: ChildProcess; exited: Promise<unknown[]> }> {
  const child = spawn(process.execPath, ["bin/agl.js", ...args], { cwd: repoRoot, env: { ...process.env, AGL_TOKEN: "" } });
  const exited = once(child, "exit");
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (stdout.includes("\n")) resolve(stdout.split("\n")[0] as string);
    });
    void exited.then(([code]) => reject(new Error(`agl ${args[0]} exited with ${code}: ${stderr}`)));
  });
  cleanup.push(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });
  return { url: /listening on (\S+)/.exec(line)?.[1] as string, line, child, exited };
}

async function claim(store: StoreClient) {
  await store.enqueueRollouts({ rollouts: [{}] });
  const [r] = (await store.dequeueRollouts({ workerId: "cli-test" })).rollouts;
  return { rolloutId: r?.rolloutId as string, attemptId: r?.latestAttempt?.attemptId as string };
}

describe("agl CLI with the proxy", () => {
  let engine: FakeVllm;

  it("agl serve --proxy serves store, triplets and the proxy on one port, following the LLM resource", async () => {
    engine = await startFakeVllm();
    cleanup.push(() => engine.close());
    const server = await startAgl(["serve", "--memory", "--port", "0", "--proxy"]);
    expect(server.line).toMatch(/\(backend: memory, llm proxy\)$/);
    const store = createStoreClient({ baseUrl: server.url });
    cleanup.push(() => store.close());
    await store.addResources({ resources: { engine: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } } } });
    const { rolloutId, attemptId } = await claim(store);
    const res = await postJson(`${server.url}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`, {
      model: engine.model,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    expect(res.status).toBe(200);
    await res.text();
    const [span] = (await store.querySpans({ rolloutId })).spans;
    expect(attrInts(span!.attributes, AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(engine.answers[0]?.responseIds);
    const triplets = createTripletClient({ baseUrl: server.url });
    cleanup.push(() => triplets.close());
    const one = await triplets.getRolloutTriplets({ rolloutId });
    expect(one.triplets[0]?.responseTokenIds).toEqual(engine.answers[0]?.responseIds);
    expect((await (await fetch(`${server.url}/proxy/status`)).json()).backends).toEqual([
      { endpoint: engine.url, model: engine.model, name: "engine" },
    ]);
    server.child.kill("SIGTERM");
    expect((await server.exited)[0]).toBe(0);
  });

  it("agl proxy runs on its own port against a store server, with fixed backends", async () => {
    engine = await startFakeVllm({ model: "served-name" });
    cleanup.push(() => engine.close());
    const server = await startAgl(["serve", "--memory", "--port", "0"]);
    const proxy = await startAgl(["proxy", "--store", server.url, "--port", "0", "--backend", engine.url, "--model", "served-name"]);
    expect(proxy.line).toBe(`agl proxy listening on ${proxy.url} (store: ${server.url})`);
    const store = createStoreClient({ baseUrl: server.url });
    cleanup.push(() => store.close());
    const { rolloutId, attemptId } = await claim(store);
    const res = await postJson(`${proxy.url}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`, {
      model: "anything",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(200);
    expect(engine.requests[0]?.body.model).toBe("served-name");
    // The answer came first; the attempt's finishing update waits until its span has landed.
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(1);
    const unknown = await postJson(`${proxy.url}/rollout/${rolloutId}/attempt/at-00000000/v1/chat/completions`, {
      model: "x",
      messages: [],
    });
    expect(unknown.status).toBe(404);
    proxy.child.kill("SIGTERM");
    expect((await proxy.exited)[0]).toBe(0);
  });

  it.each([
    ["agl serve --proxy-token-in", "serve"],
    ["agl proxy --token-in", "proxy"],
  ] as const)("%s sends a rollout's second call as token ids extending its first", async (_name, mode) => {
    engine = await startFakeVllm();
    cleanup.push(() => engine.close());
    const fixed = ["--backend", engine.url, "--model", engine.model];
    const server = await startAgl([
      "serve",
      "--memory",
      "--port",
      "0",
      ...(mode === "serve" ? ["--proxy-token-in", "--proxy-backend", engine.url] : []),
    ]);
    const proxyUrl =
      mode === "proxy" ? (await startAgl(["proxy", "--store", server.url, "--port", "0", "--token-in", ...fixed])).url : server.url;
    const store = createStoreClient({ baseUrl: server.url });
    cleanup.push(() => store.close());
    const { rolloutId, attemptId } = await claim(store);
    const url = `${proxyUrl}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`;
    const messages: { role: string; content: string }[] = [{ role: "user", content: "hi" }];
    const first = (await (await postJson(url, { model: engine.model, messages })).json()) as {
      choices: { message: { content: string } }[];
    };
    messages.push({ role: "assistant", content: first.choices[0]!.message.content }, { role: "user", content: "again" });
    expect((await postJson(url, { model: engine.model, messages })).status).toBe(200);
    expect(engine.requests.map((r) => r.path)).toEqual(["/v1/chat/completions", "/tokenize", "/tokenize", "/v1/completions"]);
    expect((await (await fetch(`${proxyUrl}/proxy/status`)).json()).tokenIn).toEqual({ first: 1, extended: 1, fallbacks: 0, reasons: {} });
  });

  it.each([
    ["agl serve --proxy-backend", "serve-fixed"],
    ["agl serve --proxy", "serve-resources"],
    ["agl proxy --backend", "standalone"],
  ] as const)("%s stamps each call with its rollout's resources id and version, so triplets filter by them", async (_name, mode) => {
    engine = await startFakeVllm();
    cleanup.push(() => engine.close());
    const server = await startAgl([
      "serve",
      "--memory",
      "--port",
      "0",
      ...(mode === "serve-fixed"
        ? ["--proxy-backend", engine.url, "--proxy-model", engine.model]
        : mode === "serve-resources"
          ? ["--proxy"]
          : []),
    ]);
    const proxyUrl =
      mode === "standalone"
        ? (await startAgl(["proxy", "--store", server.url, "--port", "0", "--backend", engine.url, "--model", engine.model])).url
        : server.url;
    const store = createStoreClient({ baseUrl: server.url });
    cleanup.push(() => store.close());
    const llm = { engine: { kind: { case: "llm" as const, value: { endpoint: engine.url, model: engine.model } } } };
    // The rollout runs under version 2 of "train"; a later snapshot ("val") is the latest when the call is made.
    await store.updateResources({ resourcesId: "train", resources: llm, createIfMissing: true });
    await store.updateResources({ resourcesId: "train", resources: llm });
    await store.enqueueRollouts({ rollouts: [{ resourcesId: "train" }] });
    await store.updateResources({ resourcesId: "val", resources: llm, createIfMissing: true });
    const [claimed] = (await store.dequeueRollouts({ workerId: "cli-test" })).rollouts;
    const { rolloutId } = claimed!;
    const attemptId = claimed!.latestAttempt!.attemptId;
    for (const stream of [false, true]) {
      const res = await postJson(`${proxyUrl}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`, {
        model: engine.model,
        messages: [{ role: "user", content: "hi" }],
        stream,
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    const spans = (await store.querySpans({ rolloutId })).spans;
    expect(
      spans.map((span) => [attrString(span.attributes, AGL_LLM_RESOURCES_ID), attrNumber(span.attributes, AGL_LLM_RESOURCES_VERSION)]),
    ).toEqual([
      ["train", 2],
      ["train", 2],
    ]);
    const triplets = createTripletClient({ baseUrl: server.url });
    cleanup.push(() => triplets.close());
    let first: StreamTripletsResponse | undefined;
    for await (const message of triplets.streamTriplets({ resourcesId: "train", resourcesVersion: 2 }, { timeoutMs: 10_000 })) {
      first = message;
      break;
    }
    expect(first?.rollout?.rolloutId).toBe(rolloutId);
    expect(first?.rollout?.triplets.map((t) => [t.resourcesId, t.resourcesVersion])).toEqual([
      ["train", 2],
      ["train", 2],
    ]);
  });

  it("rejects bad proxy flags with usage errors", async () => {
    const child = spawn(process.execPath, ["bin/agl.js", "proxy", "--backend", "ftp://x"], { cwd: repoRoot });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const [code] = await once(child, "exit");
    expect(code).toBe(2);
    expect(stderr).toMatch(/--store is required/);
  });
});

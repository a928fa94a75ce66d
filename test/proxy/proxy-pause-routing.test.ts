/** Pause/drain for weight swaps, over the TS API and the admin routes; sticky routing over several engines. */
import { silentLogger } from "../../src/core/logger.js";
import { afterEach, describe, expect, it } from "vitest";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { type ProxyHarness, postJson, startProxyHarness } from "../support/proxy-harness.js";

let h: ProxyHarness | undefined;
const extra: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const x of extra.splice(0)) await x.close();
});

const chat = { model: "fake-model", messages: [{ role: "user", content: "hi" }] };

describe("LLM proxy: pause and drain", () => {
  it("holds new calls while paused — none reaches the engine — and lets them all through on resume", async () => {
    h = await startProxyHarness();
    const { baseUrl } = await h.claim();
    h.proxy.pause();
    const calls = Array.from({ length: 5 }, () => postJson(`${baseUrl}/chat/completions`, chat));
    await expect.poll(() => h?.proxy.status().waiting).toBe(5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.engine.requests).toHaveLength(0);
    const status = await (await fetch(`${h.url}/proxy/status`)).json();
    expect(status).toMatchObject({ paused: true, mode: "wait", waiting: 5, inFlight: 0 });
    h.proxy.resume();
    const answers = await Promise.all(calls);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(h.engine.requests).toHaveLength(5);
    expect(h.proxy.status()).toMatchObject({ paused: false, waiting: 0, inFlight: 0 });
  });

  it("drains: pause + drain resolves only after the calls in flight finished", async () => {
    h = await startProxyHarness({ engine: { latencyMs: 300 } });
    const { baseUrl } = await h.claim();
    const inFlight = [postJson(`${baseUrl}/chat/completions`, chat), postJson(`${baseUrl}/chat/completions`, chat)];
    await expect.poll(() => h?.engine.requests.length).toBe(2);
    expect(h.proxy.status().inFlight).toBe(2);
    const started = Date.now();
    const res = await postJson(`${h.url}/proxy/pause`, { drain: true });
    const body = await res.json();
    expect(body).toMatchObject({ paused: true, drained: true, inFlight: 0 });
    expect(Date.now() - started).toBeGreaterThan(150);
    expect((await Promise.all(inFlight)).map((r) => r.status)).toEqual([200, 200]);
    // Weights would be swapped here; then:
    const later = postJson(`${baseUrl}/chat/completions`, chat);
    await expect.poll(() => h?.proxy.status().waiting).toBe(1);
    expect((await (await postJson(`${h.url}/proxy/resume`, {})).json()).paused).toBe(false);
    expect((await later).status).toBe(200);
  });

  it("rejects with 429 and Retry-After in reject mode; drain times out while a call hangs", async () => {
    h = await startProxyHarness({ engine: { latencyMs: 500 } });
    const { baseUrl } = await h.claim();
    const slow = postJson(`${baseUrl}/chat/completions`, chat);
    await expect.poll(() => h?.proxy.status().inFlight).toBe(1);
    await postJson(`${h.url}/proxy/pause`, { mode: "reject", retry_after_seconds: 3 });
    const refused = await postJson(`${baseUrl}/chat/completions`, chat);
    expect([refused.status, refused.headers.get("retry-after")]).toEqual([429, "3"]);
    expect((await refused.json()).error.code).toBe("proxy_paused");
    expect(await h.proxy.drain(50)).toBe(false);
    expect(await h.proxy.drain(2_000)).toBe(true);
    expect((await slow).status).toBe(200);
    const bad = await postJson(`${h.url}/proxy/pause`, { mode: "sideways" });
    expect(bad.status).toBe(400);
    expect((await fetch(`${h.url}/proxy/pause`)).status).toBe(405);
  });

  it("refuses a call that waited longer than the pause limit", async () => {
    h = await startProxyHarness({ proxy: { pauseMaxWaitMs: 100 } });
    const { baseUrl } = await h.claim();
    h.proxy.pause();
    const res = await postJson(`${baseUrl}/chat/completions`, chat);
    expect(res.status).toBe(429);
    expect(h.engine.requests).toHaveLength(0);
  });
});

describe("LLM proxy: routing", () => {
  async function fleet(n: number): Promise<{ store: Store; engines: FakeVllm[]; proxy: LlmProxy; url: string }> {
    const store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
    const engines = await Promise.all(Array.from({ length: n }, () => startFakeVllm()));
    const proxy = createLlmProxy({ store, backends: engines.map((e) => ({ endpoint: e.url, model: e.model })), logger: silentLogger });
    const url = await proxy.listen(0);
    extra.push(proxy, ...engines, store);
    return { store, engines, proxy, url };
  }

  it("sends every call of a rollout to the same engine and spreads rollouts over engines", async () => {
    const { store, engines, url } = await fleet(3);
    await store.enqueueRollouts({ rollouts: Array.from({ length: 12 }, () => ({})) });
    const { rollouts } = await store.dequeueRollouts({ workerId: "w", limit: 12 });
    for (const r of rollouts) {
      for (let turn = 0; turn < 3; turn++) {
        const res = await postJson(`${url}/rollout/${r.rolloutId}/attempt/${r.latestAttempt?.attemptId}/v1/chat/completions`, chat);
        expect(res.status).toBe(200);
      }
    }
    const counts = engines.map((e) => e.requests.length);
    expect(counts.reduce((a, b) => a + b)).toBe(36);
    expect(counts.every((c) => c % 3 === 0)).toBe(true); // whole rollouts per engine
    expect(counts.filter((c) => c > 0).length).toBeGreaterThan(1);
  });

  it("moves to another engine when the sticky one keeps failing", async () => {
    const { store, engines, url } = await fleet(2);
    await store.enqueueRollouts({ rollouts: [{}] });
    const [r] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
    const base = `${url}/rollout/${r?.rolloutId}/attempt/${r?.latestAttempt?.attemptId}/v1`;
    await postJson(`${base}/chat/completions`, chat);
    const sticky = engines.find((e) => e.requests.length === 1) as FakeVllm;
    const other = engines.find((e) => e !== sticky) as FakeVllm;
    sticky.fault({ type: "status", status: 503 });
    expect((await postJson(`${base}/chat/completions`, chat)).status).toBe(200);
    expect([sticky.requests.length, other.requests.length]).toEqual([2, 1]);
  });

  it("routes by model name and refuses models nobody serves", async () => {
    const store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
    const a = await startFakeVllm({ model: "alpha" });
    const b = await startFakeVllm({ model: "beta" });
    const proxy = createLlmProxy({ store, backends: [a, b].map((e) => ({ endpoint: e.url, model: e.model })), logger: silentLogger });
    const url = await proxy.listen(0);
    extra.push(proxy, a, b, store);
    expect((await postJson(`${url}/v1/chat/completions`, { ...chat, model: "beta" })).status).toBe(200);
    expect([a.requests.length, b.requests.length]).toEqual([0, 1]);
    const unknown = await postJson(`${url}/v1/chat/completions`, { ...chat, model: "gamma" });
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ code: "model_not_found", message: expect.stringContaining("alpha, beta") });
  });
});

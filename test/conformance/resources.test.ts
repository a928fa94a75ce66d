/**
 * Resources: ids, versions, latest, queries and WatchResources (reference §1.9, §10.1 "Resources",
 * "Resource versions").
 */
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import type { ResourcesUpdate } from "../../src/gen/agl/v1/types_pb.js";
import { ResourceSchema, SortOrder, TemplateEngine } from "../../src/gen/agl/v1/types_pb.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { expectRejectedUnchanged, json, openStore, sleep, unjson, withTimeout } from "./harness.js";

const llm = (model: string) =>
  create(ResourceSchema, {
    kind: {
      case: "llm",
      value: { endpoint: "http://h:1/v1", model, apiKey: "k", samplingParameters: { temperature: 0.5 } },
    },
  });
const prompt = (template: string) =>
  create(ResourceSchema, { kind: { case: "promptTemplate", value: { template, engine: TemplateEngine.F_STRING } } });
const jsonRes = (v: number) => create(ResourceSchema, { kind: { case: "json", value: json({ v }) } });

/** Takes the first `n` updates from a watch, then ends it. */
async function take(iter: AsyncIterable<ResourcesUpdate>, n: number, onFirst?: () => void): Promise<ResourcesUpdate[]> {
  const out: ResourcesUpdate[] = [];
  for await (const u of iter) {
    out.push(u);
    if (out.length === 1) onFirst?.();
    if (out.length >= n) break;
  }
  return out;
}

async function seedNamed(store: Store) {
  for (const id of ["manual-alpha", "manual-beta", "other-gamma"]) {
    await store.updateResources({ resourcesId: id, resources: { r: jsonRes(1) }, createIfMissing: true });
  }
}

describe.each(backends)("resources [$name]", (def) => {
  it("AddResources creates version 1 under a fresh rs- id and makes it latest", async () => {
    const { store, clock } = await openStore(def);
    expect((await store.getLatestResources({})).resources).toBeUndefined();
    const added = await store.addResources({ resources: { main: llm("m1"), sys: prompt("Hi {name}") } });
    expect(added.resourcesId).toMatch(/^rs-[0-9a-f]{12}$/);
    expect(added.version).toBe(1);
    expect(added.createTime).toBe(clock.t);
    expect(added.updateTime).toBe(clock.t);
    const main = added.resources.main?.kind;
    expect(main?.case).toBe("llm");
    expect(main?.case === "llm" && main.value.model).toBe("m1");
    expect(main?.case === "llm" && main.value.samplingParameters).toEqual({ temperature: 0.5 });
    const sys = added.resources.sys?.kind;
    expect(sys?.case === "promptTemplate" && sys.value.template).toBe("Hi {name}");
    expect(sys?.case === "promptTemplate" && sys.value.engine).toBe(TemplateEngine.F_STRING);
    expect((await store.getLatestResources({})).resources).toEqual(added);
    expect(await store.getResources({ resourcesId: added.resourcesId })).toEqual(added);
  });

  it("every resource kind round-trips", async () => {
    const { store } = await openStore(def);
    const resources = {
      a: llm("x"),
      b: { kind: { case: "proxyLlm" as const, value: { endpoint: "http://proxy/v1", model: "p" } } },
      c: prompt("{{ q }}"),
      d: { kind: { case: "json" as const, value: json({ nested: [1, { two: 2 }], s: "t", n: null }) } },
    };
    const added = await store.addResources({ resources });
    const got = await store.getResources({ resourcesId: added.resourcesId });
    expect(got.resources.b?.kind.case).toBe("proxyLlm");
    const d = got.resources.d?.kind;
    expect(d?.case === "json" ? unjson(d.value) : undefined).toEqual({ nested: [1, { two: 2 }], s: "t", n: null });
    expect(got).toEqual(added);
  });

  it("two AddResources get distinct ids; the second is latest", async () => {
    const { store } = await openStore(def);
    const a = await store.addResources({ resources: { r: jsonRes(1) } });
    const b = await store.addResources({ resources: { r: jsonRes(2) } });
    expect(a.resourcesId).not.toBe(b.resourcesId);
    expect((await store.getResources({ resourcesId: a.resourcesId })).resources.r).toEqual(jsonRes(1));
    expect((await store.getLatestResources({})).resources?.resourcesId).toBe(b.resourcesId);
  });

  it("UpdateResources adds a version, keeps create_time and becomes latest", async () => {
    const { store, clock } = await openStore(def);
    const a = await store.addResources({ resources: { r: jsonRes(1) } });
    const b = await store.addResources({ resources: { r: jsonRes(2) } });
    for (let v = 2; v <= 5; v++) {
      clock.advance(1);
      const u = await store.updateResources({ resourcesId: a.resourcesId, resources: { r: jsonRes(v) } });
      expect(u.resourcesId).toBe(a.resourcesId);
      expect(u.version).toBe(v);
      expect(u.createTime).toBe(a.createTime);
      expect(u.updateTime).toBe(clock.t);
      expect(u.resources.r).toEqual(jsonRes(v));
      expect((await store.getLatestResources({})).resources).toEqual(u);
    }
    expect((await store.getResources({ resourcesId: b.resourcesId })).version).toBe(1);
  });

  it("UpdateResources with create_if_missing creates version 1 under the given id", async () => {
    const { store, clock } = await openStore(def);
    const u = await store.updateResources({ resourcesId: "v1", resources: { r: llm("a") }, createIfMissing: true });
    expect(u.resourcesId).toBe("v1");
    expect(u.version).toBe(1);
    expect(u.createTime).toBe(clock.t);
    expect(u.updateTime).toBe(clock.t);
    await store.updateResources({ resourcesId: "v2", resources: { r: llm("b") }, createIfMissing: true });
    expect((await store.getLatestResources({})).resources?.resourcesId).toBe("v2");
    const v1 = (await store.getResources({ resourcesId: "v1" })).resources.r?.kind;
    expect(v1?.case === "llm" && v1.value.model).toBe("a");
    // create_if_missing on an existing id is an ordinary update.
    const again = await store.updateResources({ resourcesId: "v1", resources: { r: llm("c") }, createIfMissing: true });
    expect(again.version).toBe(2);
  });

  it("UpdateResources of an unknown id without create_if_missing is NOT_FOUND", async () => {
    const { store } = await openStore(def);
    await store.addResources({ resources: { r: jsonRes(1) } });
    await expectRejectedUnchanged(
      store,
      () => store.updateResources({ resourcesId: "missing-snapshot", resources: { r: jsonRes(2) } }),
      Code.NotFound,
      "missing-snapshot",
    );
  });

  it("different ids have independent versions", async () => {
    const { store } = await openStore(def);
    await store.updateResources({ resourcesId: "res1", resources: {}, createIfMissing: true });
    await store.updateResources({ resourcesId: "res2", resources: {}, createIfMissing: true });
    await store.updateResources({ resourcesId: "res1", resources: {} });
    await store.updateResources({ resourcesId: "res1", resources: {} });
    expect((await store.getResources({ resourcesId: "res1" })).version).toBe(3);
    expect((await store.getResources({ resourcesId: "res2" })).version).toBe(1);
  });

  it("latest is the snapshot written last, even an update of an older id", async () => {
    const { store } = await openStore(def);
    const a = await store.addResources({ resources: { r: jsonRes(1) } });
    await store.addResources({ resources: { r: jsonRes(2) } });
    await store.updateResources({ resourcesId: a.resourcesId, resources: { r: jsonRes(3) } });
    const latest = (await store.getLatestResources({})).resources;
    expect(latest?.resourcesId).toBe(a.resourcesId);
    expect(latest?.version).toBe(2);
  });

  it("rollouts inherit the latest resources when none is given", async () => {
    const { store } = await openStore(def);
    const current = await store.updateResources({ resourcesId: "current", resources: {}, createIfMissing: true });
    await store.updateResources({ resourcesId: "override", resources: {}, createIfMissing: true });
    await store.updateResources({ resourcesId: "current", resources: {} }); // current is latest again
    const [inherited, explicit] = (
      await store.enqueueRollouts({ rollouts: [{ input: json(1) }, { input: json(2), resourcesId: "override" }] })
    ).rollouts;
    expect(inherited!.resourcesId).toBe(current.resourcesId);
    expect(explicit!.resourcesId).toBe("override");
    const started = await store.startRollout({ rollout: { input: json(3) } });
    expect(started.resourcesId).toBe("current");
    await store.updateResources({ resourcesId: "new", resources: {}, createIfMissing: true });
    const [later] = (await store.enqueueRollouts({ rollouts: [{ input: json(4) }] })).rollouts;
    expect(later!.resourcesId).toBe("new");
  });

  it("QueryResources lists the history with filters, sort and pagination", async () => {
    const { store } = await openStore(def);
    expect((await store.queryResources({})).resources).toEqual([]);
    await seedNamed(store);
    const rid = (r: { resources: Array<{ resourcesId: string }> }) => r.resources.map((x) => x.resourcesId);
    const all = await store.queryResources({});
    expect(rid(all)).toEqual(["manual-alpha", "manual-beta", "other-gamma"]);
    expect(all.page?.total).toBe(3);
    expect(rid(await store.queryResources({ resourcesIdContains: "beta" }))).toEqual(["manual-beta"]);
    expect(rid(await store.queryResources({ resourcesId: "manual-alpha", resourcesIdContains: "manual" }))).toEqual(["manual-alpha"]);
    expect(rid(await store.queryResources({ resourcesId: "manual-alpha", resourcesIdContains: "beta" }))).toEqual([]);
    expect(rid(await store.queryResources({ page: { sortBy: "resources_id", sortOrder: SortOrder.DESC, limit: 1 } }))).toEqual([
      "other-gamma",
    ]);
    const page = await store.queryResources({ page: { limit: 1, offset: 1 } });
    expect(rid(page)).toEqual(["manual-beta"]);
    expect(page.page?.total).toBe(3);
    const contains = await store.queryResources({
      resourcesIdContains: "a",
      page: { sortBy: "resources_id", limit: 2, offset: 1 },
    });
    expect(rid(contains)).toEqual(["manual-beta", "other-gamma"]);
    expect(contains.page?.total).toBe(3);
    const past = await store.queryResources({ page: { offset: 5 } });
    expect(past.resources).toEqual([]);
    expect(past.page?.total).toBe(3);
  });

  it("QueryResources returns whole snapshots with positive times and versions", async () => {
    const { store } = await openStore(def);
    const a = await store.addResources({ resources: { r: llm("a") } });
    await store.updateResources({ resourcesId: a.resourcesId, resources: { r: llm("b") } });
    await store.addResources({ resources: { r: prompt("x") } });
    const res = (await store.queryResources({})).resources;
    expect(res).toHaveLength(2);
    expect(res[0]!.version).toBe(2);
    expect(res[1]!.version).toBe(1);
    for (const r of res) {
      expect(r.createTime).toBeGreaterThan(0);
      expect(r.updateTime).toBeGreaterThanOrEqual(r.createTime);
      expect(Object.keys(r.resources)).toEqual(["r"]);
    }
  });

  it("WatchResources delivers each new version to two concurrent watchers, in order", async () => {
    const { store } = await openStore(def);
    const base = await store.updateResources({ resourcesId: "w", resources: { r: jsonRes(0) }, createIfMissing: true });
    const ac = new AbortController();
    let ready = 0;
    let signalReady!: () => void;
    const bothReady = new Promise<void>((r) => (signalReady = r));
    const onFirst = () => {
      if (++ready === 2) signalReady();
    };
    const watchers = [0, 1].map(() => take(store.watchResources({ includeLatest: true }, { signal: ac.signal }), 5, onFirst));
    try {
      await withTimeout(bothReady, 5000);
      await store.updateResources({ resourcesId: "w", resources: { r: jsonRes(1) } });
      const other = await store.addResources({ resources: { r: jsonRes(9) } });
      await store.updateResources({ resourcesId: "w", resources: { r: jsonRes(2) } });
      await store.updateResources({ resourcesId: other.resourcesId, resources: { r: jsonRes(10) } });
      const got = await withTimeout(Promise.all(watchers), 5000);
      for (const seen of got) {
        expect(seen.map((u) => [u.resourcesId, u.version])).toEqual([
          ["w", 1],
          ["w", 2],
          [other.resourcesId, 1],
          ["w", 3],
          [other.resourcesId, 2],
        ]);
        expect(seen[0]).toEqual(base);
        expect(seen[3]!.resources.r).toEqual(jsonRes(2));
      }
    } finally {
      ac.abort();
      await Promise.allSettled(watchers);
    }
  });

  it("WatchResources without include_latest starts with the next snapshot", async () => {
    const { store } = await openStore(def);
    await store.addResources({ resources: { r: jsonRes(0) } });
    const ac = new AbortController();
    const watcher = take(store.watchResources({ includeLatest: false }, { signal: ac.signal }), 1);
    try {
      await sleep(100);
      const next = await store.addResources({ resources: { r: jsonRes(1) } });
      const [first] = await withTimeout(watcher, 5000);
      expect(first).toEqual(next);
    } finally {
      ac.abort();
      await Promise.allSettled([watcher]);
    }
  });

  it("WatchResources with include_latest and nothing published waits for the first snapshot", async () => {
    const { store } = await openStore(def);
    const ac = new AbortController();
    const watcher = take(store.watchResources({ includeLatest: true }, { signal: ac.signal }), 1);
    try {
      await sleep(100);
      const first = await store.addResources({ resources: { r: jsonRes(1) } });
      expect(await withTimeout(watcher, 5000)).toEqual([first]);
    } finally {
      ac.abort();
      await Promise.allSettled([watcher]);
    }
  });

  it("aborting a watch ends it", async () => {
    const { store } = await openStore(def);
    const ac = new AbortController();
    const seen: ResourcesUpdate[] = [];
    const run = (async () => {
      for await (const u of store.watchResources({}, { signal: ac.signal })) seen.push(u);
    })();
    await sleep(50);
    ac.abort();
    const outcome = await withTimeout(
      run.then(
        () => "ended",
        () => "rejected",
      ),
      2000,
    );
    expect(["ended", "rejected"]).toContain(outcome);
    expect(seen).toEqual([]);
  });
});

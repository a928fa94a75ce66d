/**
 * The dashboard in a real browser (Debian's Chromium, headless) against a real `agl serve` filled by real runs
 * (dashboard-store.ts). Each view is checked against what the store holds, through the test ids of ui/README.md, and
 * photographed into test-artifacts/ui/.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { equals } from "@bufbuild/protobuf";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as sc from "../../src/core/semconv.js";
import {
  type Resource,
  ResourceSchema,
  type ResourcesUpdate,
  RolloutMode,
  RolloutStatus,
  SortOrder,
  TemplateEngine,
} from "../../src/gen/agl/v1/types_pb.js";
import { repo } from "../apo/agl-cli.js";
import { attrs } from "../hooks/hook-helpers.js";
import { launchChromium, newPage, screenshot } from "./browser.js";
import { APO_RUN, CALCULATOR_RESOURCES, type DashboardStore, startDashboardStore, TRAIN_RESOURCES } from "./dashboard-store.js";

let store: DashboardStore;
let browser: Browser;
let page: Page;
/** What the shared page reported as errors: console errors (CSP violations among them) and uncaught exceptions. */
const pageErrors: string[] = [];

/** expect.poll with room for a busy machine (the default gives up after 1 s). */
const poll = <T>(value: () => T | Promise<T>, options: { timeout?: number } = {}) =>
  expect.poll(value, { timeout: 10_000, interval: 100, ...options });
const id = (testId: string) => `[data-testid="${testId}"]`;
const text = async (testId: string, scope: Page = page) => ((await scope.locator(id(testId)).first().textContent()) ?? "").trim();

/** The names whose resource differs between two versions, as `name:added|removed|changed`, sorted. */
function changedNames(before: Record<string, Resource>, after: Record<string, Resource>): string[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return names.flatMap((name) => {
    const a = before[name];
    const b = after[name];
    if (a === undefined) return [`${name}:added`];
    if (b === undefined) return [`${name}:removed`];
    return equals(ResourceSchema, a, b) ? [] : [`${name}:changed`];
  });
}

/** Opens a route of the app (hash routing) with the token already given. */
async function open(route: string): Promise<void> {
  await page.goto(`${store.url}/#${route}`);
  await page.locator(id("app-nav")).waitFor();
}

beforeAll(async () => {
  if (!existsSync(join(repo, "dist/ui/index.html"))) throw new Error("the dashboard is not built: run make ui (make test does)");
  [store, browser] = await Promise.all([startDashboardStore(), launchChromium()]);
  page = await newPage(browser);
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  // The app keeps the token in sessionStorage (ui/README.md, Auth); the auth test goes through the form itself.
  await page.addInitScript((token) => sessionStorage.setItem("agl.token", token), store.token);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await store?.close();
});

describe("the dashboard", () => {
  it("asks for the token, says clearly when it is wrong, and lets the right one in", async () => {
    const fresh = await newPage(browser);
    try {
      await fresh.goto(store.url);
      await fresh.locator(id("auth-form")).waitFor();
      await fresh.locator(id("auth-token-input")).fill("not-the-token");
      await fresh.locator(id("auth-submit")).click();
      await poll(() => text("auth-error", fresh)).toMatch(/invalid bearer token/i);
      expect(await fresh.locator(id("view-overview")).count()).toBe(0);
      await screenshot(fresh, "auth-wrong-token");
      await fresh.locator(id("auth-token-input")).fill(store.token);
      await fresh.locator(id("auth-submit")).click();
      await fresh.locator(id("view-overview")).waitFor();
      expect(await fresh.locator(id("auth-error")).count()).toBe(0);
    } finally {
      await fresh.close();
    }
  });

  it("Overview: counts by status and mode, queue, workers and the latest resources, as the store has them", async () => {
    const stats = await store.client.getStatistics({});
    const { rollouts } = await store.client.queryRollouts({});
    const { workers } = await store.client.queryWorkers({});
    const latest = (await store.client.getLatestResources({})).resources;
    await open("/");
    await page.locator(id("view-overview")).waitFor();
    await poll(() => text("overview-total-rollouts")).toBe(String(stats.totalRollouts));
    expect(await text("overview-queue-depth")).toBe(String(stats.queueLength));
    const count = (status: RolloutStatus) => rollouts.filter((r) => r.status === status).length;
    expect(await text("status-count-succeeded")).toBe(String(count(RolloutStatus.SUCCEEDED)));
    expect(await text("status-count-failed")).toBe(String(count(RolloutStatus.FAILED)));
    const modes = (mode: RolloutMode) => rollouts.filter((r) => r.mode === mode).length;
    expect(await text("mode-count-train")).toBe(String(modes(RolloutMode.TRAIN)));
    expect(await text("mode-count-val")).toBe(String(modes(RolloutMode.VAL)));
    const shownWorkers = await page.locator(id("worker-row")).evaluateAll((rows) => rows.map((r) => r.getAttribute("data-worker-id")));
    expect(shownWorkers.sort()).toEqual(workers.map((w) => w.workerId).sort());
    expect(await text("latest-resources-id")).toBe(latest?.resourcesId);
    expect(await text("latest-resources-version")).toContain(String(latest?.version));
    await screenshot(page, "overview");
  });

  it("Rollouts: server-side filters, rewards per row, paging info", async () => {
    await open(`/rollouts?resources=${CALCULATOR_RESOURCES}`);
    await poll(() => text("rollouts-total")).toBe("5 rollouts");
    const rows = async () =>
      page.locator(id("rollout-row")).evaluateAll((els) =>
        els.map((el) => ({
          id: el.getAttribute("data-rollout-id"),
          status: el.querySelector('[data-testid="cell-status"]')?.textContent?.trim(),
          reward: el.querySelector('[data-testid="cell-reward"]')?.textContent?.trim(),
        })),
      );
    const shown = await rows();
    for (const [i, rollout] of store.calculator.entries()) {
      // The fourth task expects a wrong answer: it succeeded with reward 0.
      expect(shown.find((r) => r.id === rollout.rolloutId)).toMatchObject({ status: "succeeded", reward: i === 3 ? "0" : "1" });
    }
    expect(shown.find((r) => r.id === store.failed.rolloutId)).toMatchObject({ status: "failed" });
    await screenshot(page, "rollouts");

    await page.locator(id("filter-status-failed")).check();
    await poll(async () => (await rows()).map((r) => r.id)).toEqual([store.failed.rolloutId]);
    expect(page.url()).toContain("status=failed");

    // Sorted by the server: by id, one way then the other.
    await page.locator(id("filter-status-failed")).uncheck();
    await poll(async () => (await rows()).length).toBe(5);
    const ids = store.calculator
      .map((r) => r.rolloutId)
      .concat(store.failed.rolloutId)
      .sort();
    const header = page.locator(id("rollouts-sort-rollout_id"));
    await header.click();
    const direction = async () => page.locator("th", { has: header }).getAttribute("aria-sort");
    await poll(direction).toMatch(/ascending|descending/);
    const first = (await direction()) === "ascending" ? ids : [...ids].reverse();
    await poll(async () => (await rows()).map((r) => r.id)).toEqual(first);
    await header.click();
    await poll(async () => (await rows()).map((r) => r.id)).toEqual([...first].reverse());

    // Every train rollout of the RL run: 3 steps of 4 tasks x 4 samples.
    await open(`/rollouts?resources=${TRAIN_RESOURCES}&mode=train&size=50`);
    await poll(() => text("rollouts-total")).toBe("48 rollouts");
    expect(await text("rollouts-page-info")).toMatch(/^1\D+48 of 48$/);

    // Pages of the whole store, fetched one at a time (rows are virtualized: only those in view are in the DOM).
    const total = (await store.client.queryRollouts({ page: { limit: 0 } })).page?.total as number;
    await open("/rollouts?size=50");
    await poll(() => text("rollouts-page-info")).toMatch(new RegExp(`^1\\D+50 of ${total}$`));
    const page1 = (await rows()).map((r) => r.id);
    await page.locator(id("rollouts-page-next")).click();
    await poll(() => text("rollouts-page-info")).toMatch(new RegExp(`^51\\D+100 of ${total}$`));
    await poll(async () => (await rows()).filter((r) => page1.includes(r.id)).length).toBe(0);
    expect((await rows()).length).toBeGreaterThan(0);
  });

  it("a rollout: attempts, spans, LLM calls as chat with the engine's token ids and logprobs, reward, triplets", async () => {
    const rollout = store.calculator[0];
    if (!rollout) throw new Error("no calculator rollout");
    const { spans } = await store.client.querySpans({ rolloutId: rollout.rolloutId });
    await open(`/rollouts/${rollout.rolloutId}`);
    await page.locator(id("view-rollout")).waitFor();
    expect(await text("rollout-id")).toBe(rollout.rolloutId);
    expect(await text("rollout-status")).toBe("succeeded");
    expect(await text("rollout-final-reward")).toBe("1");
    expect(await text("rollout-input")).toContain("What is 12 * 7?");
    expect(await page.locator(id("attempt-row")).count()).toBe(1);
    await poll(() => page.locator(id("span-row")).count()).toBe(spans.length);
    // Two model calls (the tool call, then the answer), each recorded by the agent's fetch hook and by the proxy: the
    // view shows each call once.
    await poll(() => page.locator(id("llm-call")).count()).toBe(2);
    const callSpanIds = await page.locator(id("llm-call")).evaluateAll((els) => els.map((el) => el.getAttribute("data-span-id")));
    for (const spanId of callSpanIds) {
      const span = spans.find((s) => s.spanId === spanId);
      const ids = attrs(span)[sc.AGL_LLM_RESPONSE_TOKEN_IDS] as number[];
      const logprobs = attrs(span)[sc.AGL_LLM_LOGPROBS] as number[];
      // The ids the engine sampled, as recorded, each shown with its logprob.
      expect(store.engine.answers.some((a) => JSON.stringify(a.responseIds) === JSON.stringify(ids))).toBe(true);
      const call = page.locator(`${id("llm-call")}[data-span-id="${spanId}"]`);
      const tokens = await call
        .locator(id("token"))
        .evaluateAll((els) => els.map((el) => [Number(el.getAttribute("data-token-id")), Number(el.getAttribute("data-logprob"))]));
      expect(tokens).toEqual(ids.map((t, i) => [t, expect.closeTo(logprobs[i] as number, 6)]));
      expect(
        await call
          .locator(`${id("chat-message")}[data-role="user"]`)
          .first()
          .textContent(),
      ).toContain("What is 12 * 7?");
    }
    expect(await page.locator(id("tool-call")).first().textContent()).toContain("calculate");
    // A span of the waterfall, selected: its attributes as stored.
    const selected = spans.find((s) => s.spanId === callSpanIds[0]);
    await page.locator(`${id("span-row")}[data-span-id="${selected?.spanId}"]`).click();
    const responseIds = page.locator(`${id("span-attribute")}[data-key="${sc.AGL_LLM_RESPONSE_TOKEN_IDS}"]`);
    await poll(() => responseIds.count()).toBe(1);
    expect(await responseIds.textContent()).toContain(String((attrs(selected)[sc.AGL_LLM_RESPONSE_TOKEN_IDS] as number[])[0]));
    await poll(() => page.locator(id("reward-row")).count()).toBe(1);
    const reward = spans.find((s) => s.name === sc.AGL_ANNOTATION);
    const [name, value, where] = await page.locator(`${id("reward-row")} td`).allTextContents();
    expect([name, value, where]).toEqual(["primary", "1", `span ${reward?.spanId} · seq ${reward?.sequenceId}`]);
    await poll(() => page.locator(id("triplet-row")).count()).toBe(2);
    await screenshot(page, "rollout");

    await open(`/rollouts/${store.failed.rolloutId}`);
    await poll(() => page.locator(id("attempt-row")).count()).toBe(2);
    const statuses = await page.locator(id("attempt-status")).allTextContents();
    expect(statuses.map((s) => s.trim())).toEqual(["failed", "failed"]);
    await screenshot(page, "rollout-failed");
  });

  it("Resources: versions of every snapshot, and the diff of the APO seed against its best prompt", async () => {
    const { resources } = await store.client.queryResources({});
    await open(`/resources?a=apo-${APO_RUN}-seed&b=${store.apo.best.resourcesId}`);
    await page.locator(id("view-resources")).waitFor();
    // One row per snapshot, at its latest version.
    const latest = new Map<string, number>();
    for (const r of resources) latest.set(r.resourcesId, Math.max(r.version, latest.get(r.resourcesId) ?? 0));
    const listed = () =>
      page
        .locator(id("resources-row"))
        .evaluateAll((rows) => rows.map((r) => `${r.getAttribute("data-resources-id")}@${r.getAttribute("data-version")}`).sort());
    await poll(listed).toEqual([...latest].map(([resourcesId, version]) => `${resourcesId}@${version}`).sort());
    const diff = page.locator(`${id("template-diff")}[data-name="booking"]`);
    await poll(async () => (await diff.locator(id("diff-added")).allTextContents()).join("\n")).toContain("fewest seats");
    await screenshot(page, "resources");
  });

  it("Resources: the version history of the RL run's policy and a diff of two versions of the APO best prompt, as the store has them", async () => {
    const history = async (resourcesId: string) =>
      (await store.client.queryResourceVersions({ resourcesId, page: { sortBy: "version", sortOrder: SortOrder.DESC } })).resources;
    const rows = () => page.locator(id("history-row")).evaluateAll((els) => els.map((el) => Number(el.getAttribute("data-version"))));
    const changes = (version: number) =>
      page
        .locator(`${id("history-row")}[data-version="${version}"] ${id("history-change")}`)
        .evaluateAll((els) => els.map((el) => `${el.getAttribute("data-name")}:${el.getAttribute("data-change")}`));

    // The policy: a version per step, newest first, each with the resources it changed against the one before.
    const policy = await history(TRAIN_RESOURCES);
    expect(policy.length).toBeGreaterThan(1);
    await open(`/resources?id=${TRAIN_RESOURCES}`);
    await poll(rows).toEqual(policy.map((v) => v.version));
    expect(await text("history-page-info")).toMatch(new RegExp(`^1\\D+${policy.length} of ${policy.length}$`));
    for (const [i, v] of policy.entries())
      expect(await changes(v.version)).toEqual(changedNames(policy[i + 1]?.resources ?? {}, v.resources));
    // By default the diff is the first version against the current one.
    const diff = page.locator(id("resources-diff"));
    await poll(() => diff.getAttribute("data-b")).toBe(`${TRAIN_RESOURCES}@${policy[0]?.version}`);
    expect(await diff.getAttribute("data-a")).toBe(`${TRAIN_RESOURCES}@1`);

    // The APO run's best prompt: the seed's at version 1, then each new leader's. Diff, by clicks on the history, the
    // first version against the first one whose booking prompt differs from the seed's.
    const best = store.apo.best.resourcesId;
    const versions = (await history(best)).reverse();
    const booking = (v: ResourcesUpdate | undefined) => {
      const kind = v?.resources.booking?.kind;
      return kind?.case === "promptTemplate" ? kind.value.template : "";
    };
    const seed = versions[0];
    const improved = versions.find((v) => booking(v) !== booking(seed));
    expect(improved, `a version of ${best} with another booking prompt`).toBeDefined();
    await open(`/resources?id=${best}`);
    await poll(rows).toEqual([...versions].reverse().map((v) => v.version));
    await page.locator(`${id("history-row")}[data-version="1"] ${id("history-pick-a")}`).click();
    await page.locator(`${id("history-row")}[data-version="${improved?.version}"] ${id("history-pick-b")}`).click();
    await poll(() => page.url()).toContain(`a=${encodeURIComponent(`${best}@1`)}&b=${encodeURIComponent(`${best}@${improved?.version}`)}`);
    const shown = async (kind: string) =>
      (await page.locator(`${id("template-diff")}[data-name="booking"] ${id(kind)}`).allTextContents()).map((line) => line.trim());
    const lines = (v: ResourcesUpdate | undefined) =>
      booking(v)
        .split("\n")
        .map((line) => line.trim());
    const added = lines(improved).filter((line) => line !== "" && !lines(seed).includes(line));
    const removed = lines(seed).filter((line) => line !== "" && !lines(improved).includes(line));
    expect(added.length + removed.length).toBeGreaterThan(0);
    await poll(() => shown("diff-added")).toEqual(expect.arrayContaining(added));
    expect(await shown("diff-removed")).toEqual(expect.arrayContaining(removed));
    expect(await diff.getAttribute("data-a")).toBe(`${best}@1`);
    expect(await diff.getAttribute("data-b")).toBe(`${best}@${improved?.version}`);
    await screenshot(page, "resources-history");

    // The diff is linkable: the same URL in a fresh page shows it again.
    const fresh = await newPage(browser);
    try {
      await fresh.addInitScript((token) => sessionStorage.setItem("agl.token", token), store.token);
      await fresh.goto(page.url());
      await poll(async () =>
        (await fresh.locator(`${id("template-diff")}[data-name="booking"] ${id("diff-added")}`).allTextContents()).map((l) => l.trim()),
      ).toEqual(expect.arrayContaining(added));
    } finally {
      await fresh.close();
    }
  });

  it("Resources: a long history comes a page at a time from the store", async () => {
    const resourcesId = "paged-history";
    const count = 57;
    for (let n = 1; n <= count; n++) {
      await store.client.updateResources({
        resourcesId,
        createIfMissing: true,
        resources: { prompt: { kind: { case: "promptTemplate", value: { template: `step ${n}`, engine: TemplateEngine.F_STRING } } } },
      });
    }
    const rows = () => page.locator(id("history-row")).evaluateAll((els) => els.map((el) => Number(el.getAttribute("data-version"))));
    await open(`/resources?id=${resourcesId}`);
    await poll(rows).toEqual(Array.from({ length: 50 }, (_, i) => count - i));
    expect(await text("history-page-info")).toMatch(new RegExp(`^1\\D+50 of ${count}$`));
    // The page's oldest version still says what it changed (the store sent the one before it too).
    expect(
      await page.locator(`${id("history-row")}[data-version="${count - 49}"] ${id("history-change")}`).getAttribute("data-change"),
    ).toBe("changed");
    await page.locator(id("history-page-next")).click();
    await poll(rows).toEqual(Array.from({ length: count - 50 }, (_, i) => count - 50 - i));
    expect(await text("history-page-info")).toMatch(new RegExp(`^51\\D+${count} of ${count}$`));
    expect(page.url()).toContain("page=1");
    expect(await page.locator(`${id("history-row")}[data-version="1"] ${id("history-change")}`).getAttribute("data-change")).toBe("added");
    // One step's change: a version against the one before it.
    await page.locator(`${id("history-row")}[data-version="3"] ${id("history-vs-previous")}`).click();
    const diff = page.locator(`${id("template-diff")}[data-name="prompt"]`);
    await poll(() => diff.locator(id("diff-added")).allTextContents()).toEqual(["step 3"]);
    expect(await diff.locator(id("diff-removed")).allTextContents()).toEqual(["step 2"]);
  });

  it("Training: reward per step and version of the RL run, validation, tokens per call", async () => {
    const { stats } = await store.client.getRewardsByResources({ resourcesIdIn: [TRAIN_RESOURCES] });
    const latest = await store.client.getResources({ resourcesId: TRAIN_RESOURCES });
    await open(`/training?resources=${TRAIN_RESOURCES}`);
    await page.locator(id("view-training")).waitFor();
    const summary = page.locator(id("training-summary"));
    const train = stats.filter((s) => s.mode === RolloutMode.TRAIN);
    const val = stats.filter((s) => s.mode === RolloutMode.VAL);
    // 3 steps of 4 tasks x 4 samples, served by versions 1-3; validation of 4 tasks by versions 1, 3 and 4.
    expect(train.map((s) => [s.resourcesVersion, s.rollouts])).toEqual([
      [1, 16],
      [2, 16],
      [3, 16],
    ]);
    expect(val.map((s) => [s.resourcesVersion, s.rollouts])).toEqual([
      [1, 4],
      [3, 4],
      [4, 4],
    ]);
    // The store's reward per version, which the charts plot, is the trainer's own reward per step.
    expect(store.stepRewards).toHaveLength(3);
    // (the trainer prints 3 decimals, rounding halves to even).
    for (const [i, s] of train.entries())
      expect(Math.abs((s.mean as number) - (store.stepRewards[i] as number))).toBeLessThanOrEqual(0.0005 + 1e-9);
    const lastMean = train.at(-1)?.mean as number;
    await poll(async () => (await summary.textContent()) ?? "").toContain(
      `3 versions trained on · 48 train rollouts · 12 validation rollouts · latest version v${latest.version}`,
    );
    expect(await summary.textContent()).toContain(`last mean reward ${Number.isInteger(lastMean) ? lastMean : lastMean.toFixed(3)}`);
    // The canvas is opaque; each chart says how many points it draws.
    const points = (chart: string) => page.locator(id(chart)).getAttribute("data-points");
    expect(await points("training-reward-by-version")).toBe("3");
    expect(await points("training-reward-by-step")).toBe("3");
    expect(await points("training-val-chart")).toBe("3");
    expect(await points("training-tokens-chart")).toBe("3");
    for (const chart of ["training-reward-by-version", "training-reward-by-step", "training-val-chart", "training-tokens-chart"]) {
      expect(await page.locator(`${id(chart)} canvas, ${id(chart)} svg`).count()).toBeGreaterThan(0);
    }
    await screenshot(page, "training");
  });

  it("APO: the candidate tree of the run, scores per round, best against seed", async () => {
    await open(`/apo?run=${APO_RUN}`);
    await page.locator(id("view-apo")).waitFor();
    // The section renders before the run's snapshots arrive; the tree comes whole from one query.
    await page.locator(`${id("apo-candidate")}[data-candidate="seed"]`).waitFor();
    const candidates = await page.locator(id("apo-candidate")).evaluateAll((rows) =>
      rows.map((r) => ({
        key: r.getAttribute("data-candidate"),
        parent: r.getAttribute("data-parent"),
        round: r.getAttribute("data-round"),
      })),
    );
    const keys = candidates.map((c) => c.key);
    expect(keys).toContain("seed");
    expect(keys).toContain(store.apo.best.key);
    // Every child the run kept, under its parent, in its round (as the run's own report says).
    for (const round of store.apo.rounds)
      for (const child of round.children)
        expect(candidates).toContainEqual({ key: child.key, parent: child.parent, round: String(round.round) });
    const row = (key: string) => page.locator(`${id("apo-candidate")}[data-candidate="${key}"]`).textContent();
    await poll(() => row("seed")).toContain((store.apo.baseline as number).toFixed(3));
    await poll(() => row(store.apo.best.key)).toContain(String(store.apo.best.score));
    // A candidate, clicked: its critique and its template.
    await page
      .locator(`${id("apo-candidate")}[data-candidate="${store.apo.best.key}"]`)
      .getByRole("button")
      .click();
    await poll(() => text("apo-critique")).toContain("fewest seats");
    expect(await text("apo-critique")).toContain(store.apo.best.templates.booking?.template);
    // Each round's batch score of every candidate the round scored, as the run reported it.
    for (const round of store.apo.rounds)
      for (const { key, score } of round.scores) expect(await row(key)).toContain(`r${round.round} ${score.toFixed(3)}`);
    expect(await page.locator(id("apo-tree")).getAttribute("data-points")).toBe(String(candidates.length));
    expect(await page.locator(`${id("apo-scores-chart")} canvas, ${id("apo-scores-chart")} svg`).count()).toBeGreaterThan(0);
    const added = await page.locator(`${id("apo-best-diff")} ${id("diff-added")}`).allTextContents();
    expect(added.join("\n")).toContain("fewest seats");
    await screenshot(page, "apo");
  });

  it("shows a rollout that completes while the page is open, without a reload", async () => {
    await open(`/rollouts?resources=${CALCULATOR_RESOURCES}`);
    await poll(() => text("rollouts-total")).toBe("5 rollouts");
    // A reload would drop this mark.
    await page.evaluate(() => Object.assign(globalThis, { aglTestMark: true }));
    const rollout = await store.runCalculator({ question: "What is 40 + 2?", answer: 42 });
    const row = page.locator(`${id("rollout-row")}[data-rollout-id="${rollout.rolloutId}"]`);
    await poll(async () => (await row.count()) && (await row.locator(id("cell-status")).textContent())?.trim(), { timeout: 20_000 }).toBe(
      "succeeded",
    );
    expect(await text("rollouts-total")).toBe("6 rollouts");
    expect(await page.evaluate(() => "aglTestMark" in globalThis)).toBe(true);
    await screenshot(page, "rollouts-live");
  });

  it("shows a resources version published while the page is open, from WatchResources", async () => {
    await open("/resources");
    await poll(() => page.locator(id("live-indicator")).getAttribute("data-live")).toBe("true");
    await page.evaluate(() => Object.assign(globalThis, { aglTestMark: true }));
    const published = await store.client.updateResources({
      resourcesId: CALCULATOR_RESOURCES,
      resources: { main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${store.url}/v1`, model: "calc-model-2" } } } },
    });
    await poll(() => text("resources-live-versions")).toContain(`${CALCULATOR_RESOURCES} v${published.version}`);
    await poll(() => page.locator(`${id("resources-row")}[data-resources-id="${CALCULATOR_RESOURCES}"]`).getAttribute("data-version")).toBe(
      String(published.version),
    );
    expect(await page.evaluate(() => "aglTestMark" in globalThis)).toBe(true);
  });

  it("ran every view without an error in the page (the server's CSP included)", () => {
    expect(pageErrors).toEqual([]);
  });
});

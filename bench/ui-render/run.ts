/**
 * First render of the dashboard in headless Chromium against `agl serve` (compiled; `make bench-ui` builds it) on a
 * SQLite store of --rollouts rollouts (default 100,000) and one rollout of --spans spans (default 500), filled by
 * ../ui-queries/fill.ts. Each repetition opens a fresh browser context (no cache, no state) and reads, in the page,
 * `performance.now()` (ms since navigation start) on the first animation frame where:
 *   - rollouts view (`#/rollouts`): the first rollout rows are in the DOM;
 *   - one rollout (`#/rollouts/<id>`): its span waterfall rows and LLM calls are in the DOM.
 * Prints every repetition and the median.
 *
 *   npx tsx bench/ui-render/run.ts [--rollouts 100000] [--spans 500] [--reps 5] [--db FILE (kept and reused)]
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Browser } from "playwright-core";
import { launchChromium, screenshot } from "../../test/browser/browser.js";
import { startServerProcess } from "../../test/support/server-process.js";
import { createStoreClient } from "../../src/client/store-client.js";
import { median } from "../stats.js";
import { BIG_ROLLOUT_ID, fillDashboardStore } from "../ui-queries/fill.js";

const { values: args } = parseArgs({
  options: {
    rollouts: { type: "string", default: "100000" },
    spans: { type: "string", default: "500" },
    reps: { type: "string", default: "5" },
    db: { type: "string" },
  },
});
const reps = Number(args.reps);
const dir = mkdtempSync(join(tmpdir(), "agl-bench-ui-"));
const path = args.db ?? join(dir, "ui.db");

if (args.db && existsSync(args.db)) {
  console.log(`reusing ${args.db}`);
} else {
  const started = Date.now();
  console.log(`filling ${path}: ${args.rollouts} rollouts, one of ${args.spans} spans`);
  await fillDashboardStore({ path, rollouts: Number(args.rollouts), spans: Number(args.spans) });
  console.log(`filled in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
const server = await startServerProcess(["--database", path], { compiled: true });
const client = createStoreClient({ baseUrl: server.url });
const stats = await client.getStatistics({});
console.log(`store: ${stats.totalRollouts} rollouts, ${stats.totalSpans} spans`);

/** ms from navigation start to the first frame where every selector matches. */
async function firstRender(browser: Browser, route: string, selectors: string[], shot?: string): Promise<number> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(`${server.url}/#${route}`, { waitUntil: "commit" });
    // A function, not a string: the dashboard's CSP forbids eval. The project's types have no DOM, hence the cast.
    const ready = (all: string[]) => {
      const { document } = globalThis as unknown as { document: { querySelector(selector: string): unknown } };
      return all.every((s) => document.querySelector(s)) && performance.now();
    };
    const handle = await page.waitForFunction(ready, selectors, { polling: "raf" });
    const ms = (await handle.jsonValue()) as number;
    if (shot) await screenshot(page, shot);
    return ms;
  } finally {
    await context.close();
  }
}

const browser = await launchChromium();
try {
  const cases = [
    {
      name: `rollouts view (${args.rollouts} rollouts)`,
      route: "/rollouts",
      selectors: ['[data-testid="rollout-row"]'],
      shot: "bench-rollouts",
    },
    {
      name: `one rollout (${args.spans} spans)`,
      route: `/rollouts/${BIG_ROLLOUT_ID}`,
      selectors: ['[data-testid="span-row"]', '[data-testid="llm-call"]'],
      shot: "bench-rollout",
    },
  ];
  for (const c of cases) {
    // One warm-up load (the server's first queries, Chromium's first start of a renderer) is not counted.
    await firstRender(browser, c.route, c.selectors);
    const times: number[] = [];
    for (let i = 0; i < reps; i++) times.push(await firstRender(browser, c.route, c.selectors, i === 0 ? c.shot : undefined));
    console.log(`${c.name}: first render median ${median(times).toFixed(0)} ms (${times.map((t) => t.toFixed(0)).join(", ")})`);
  }
} finally {
  await browser.close();
  client.close();
  await server.stop();
  if (!args.db) rmSync(dir, { recursive: true, force: true });
}

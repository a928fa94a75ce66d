import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ApoEvent } from "../../src/algorithm/apo/apo-events.js";
import type { ApoOptions } from "../../src/algorithm/apo/apo-options.js";
import { runApo } from "../../src/algorithm/apo/apo.js";
import { readSnapshot } from "../../src/algorithm/apo/candidate.js";
import { RolloutMode } from "../../src/gen/agl/v1/types_pb.js";
import { type ApoHarness, hintTasks, startApoHarness } from "./apo-harness.js";
import { batchMean, batchRollouts, snapshot } from "./store-reads.js";

let h: ApoHarness;
beforeAll(async () => {
  h = await startApoHarness();
});
afterAll(() => h.close());

const search = (runId: string, extra: Partial<ApoOptions> = {}): ApoOptions => ({
  ...h.base(),
  runId,
  templates: { prompt: "Answer this: {q}" },
  train: hintTasks(12),
  val: hintTasks(9, 100),
  beamWidth: 2,
  branchFactor: 2,
  rounds: 2,
  gradientBatchSize: 3,
  valBatchSize: 4,
  seed: 11,
  ...extra,
});

describe("beam search", { timeout: 90_000 }, () => {
  test("parents, children, selection and the history best, all through real rollouts", async () => {
    const store = h.store.client;
    const report = await runApo(search("mech"));
    expect(report.status).toBe("completed");
    expect(report.baseline).toBe(0);
    expect(report.rounds).toHaveLength(2);

    const [r1, r2] = report.rounds;
    // Round 1: the beam holds only the seed, so it fills every parent slot.
    expect(r1?.parents).toEqual(["seed", "seed"]);
    // Round 2: the parents are the beam kept by round 1.
    expect([...(r2?.parents ?? [])].sort()).toEqual([...(r1?.beam ?? [])].sort());

    let previousBest = report.baseline as number;
    for (const round of report.rounds) {
      expect(round.children.length + round.rejected.length).toBe(4);
      // Each child is its parent's template with the one hint the critique asked for.
      for (const child of round.children) {
        const { templates, record } = await snapshot(store, `apo-mech-${child.key}`);
        const parent = await snapshot(store, `apo-mech-${child.parent}`);
        expect(templates.prompt?.template).toMatch(new RegExp(`^${escapeRegExp(parent.templates.prompt?.template ?? "")} hint-[abc]$`));
        expect(record.parent).toBe(child.parent);
        expect(String(record.critique)).toMatch(/^- add hint-[abc]/);
        // Its critique came from the parent rolled out on a training batch.
        const train = await batchRollouts(store, "mech", `${child.key}:train`);
        expect(train).toHaveLength(3);
        for (const r of train) {
          expect(r.mode).toBe(RolloutMode.TRAIN);
          expect(r.resourcesId).toBe(`apo-mech-${child.parent}`);
        }
      }
      // Every candidate (the beam kept so far and the new children) is scored on the same validation batch.
      const scores = round.scores.map((s) => s.score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
      for (const { key, score } of round.scores) {
        const rollouts = await batchRollouts(store, "mech", `r${round.round}:val:${key}`);
        expect(rollouts.map((r) => Number(r.metadata?.task_index))).toEqual(round.valBatch);
        expect(rollouts.every((r) => r.mode === RolloutMode.VAL && r.resourcesId === `apo-mech-${key}`)).toBe(true);
        expect(await batchMean(store, "mech", `r${round.round}:val:${key}`)).toBeCloseTo(score, 10);
      }
      // The beam is the top B, and its leader is measured on the full validation set.
      expect(round.beam).toEqual(round.scores.slice(0, 2).map((s) => s.key));
      expect(round.leader).toBe(round.beam[0]);
      expect(await batchMean(store, "mech", `full:${round.leader}`)).toBeCloseTo(round.leaderScore, 10);
      expect((await batchRollouts(store, "mech", `full:${round.leader}`)).length).toBe(9);
      // The history best only ever goes up.
      expect(round.best.score).toBe(Math.max(previousBest, round.leaderScore));
      expect(round.improved).toBe(round.leaderScore > previousBest);
      previousBest = round.best.score;
    }
    // Two hints answer two kinds in three.
    expect(report.best.score).toBeCloseTo(2 / 3, 10);
    expect(report.best.templates.prompt?.template).toMatch(/^Answer this: \{q\}( hint-[abc]){2}$/);
  });

  test("the best prompt is published at every improvement and is the latest resource at the end", async () => {
    const store = h.store.client;
    const abort = new AbortController();
    const published: { version: number; template: string; candidate: string }[] = [];
    const watching = (async () => {
      try {
        for await (const update of store.watchResources({}, { signal: abort.signal })) {
          if (update.resourcesId !== "apo-pub-best") continue;
          const { templates, record } = readSnapshot(update);
          published.push({ version: update.version, template: templates.prompt?.template ?? "", candidate: String(record.candidate) });
        }
      } catch {}
    })();
    const improvements: Extract<ApoEvent, { type: "new_best" }>[] = [];
    const report = await runApo(search("pub", { onEvent: (e) => e.type === "new_best" && improvements.push(e) }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    abort.abort();
    await watching;

    expect(improvements.length).toBeGreaterThanOrEqual(2);
    for (const event of improvements) {
      const seen = published.find((p) => p.version === event.version);
      expect(seen?.candidate).toBe(event.key);
    }
    const latest = (await store.getLatestResources({})).resources;
    if (!latest) throw new Error("nothing published");
    expect(latest.resourcesId).toBe("apo-pub-best");
    expect(latest.version).toBe(report.best.version);
    const { templates, record } = readSnapshot(latest);
    expect(templates.prompt?.template).toBe(report.best.templates.prompt?.template);
    expect(record.score).toBe(report.best.score);
    // The agent's other resources travel with the best prompt, so `agl run` against the latest resources just works.
    expect(latest.resources.llm?.kind.case).toBe("llm");
    expect(published.at(-1)?.version).toBe(report.best.version);
  });

  test("the same seed and the same LLM answers give the same run; another seed another path", async () => {
    const a = await runApo(search("seed-a"));
    const b = await runApo(search("seed-b"));
    const c = await runApo(search("seed-c", { seed: 12 }));
    const path = (r: typeof a) =>
      r.rounds.map(({ parents, children, rejected, scores, valBatch, beam, leader, leaderScore }) => ({
        parents,
        children,
        rejected,
        scores,
        valBatch,
        beam,
        leader,
        leaderScore,
      }));
    expect(path(b)).toEqual(path(a));
    expect(b.best.templates).toEqual(a.best.templates);
    expect(b.budget.used).toEqual(a.budget.used);
    expect(path(c).map((r) => r.valBatch)).not.toEqual(path(a).map((r) => r.valBatch));
  });

  test("several templates are optimized in one run: each child edits one of them", async () => {
    const report = await runApo(search("multi", { templates: { prompt: "Answer this: {q}", style: "Be brief." }, rounds: 2 }));
    const targets = new Set<string>();
    for (const round of report.rounds) {
      for (const child of round.children) {
        targets.add(child.target);
        const mine = await snapshot(h.store.client, `apo-multi-${child.key}`);
        const parent = await snapshot(h.store.client, `apo-multi-${child.parent}`);
        const other = child.target === "prompt" ? "style" : "prompt";
        expect(mine.templates[other]).toEqual(parent.templates[other]);
        expect(mine.templates[child.target]?.template).not.toBe(parent.templates[child.target]?.template);
      }
    }
    expect(targets).toEqual(new Set(["prompt", "style"]));
    // The critique of one template sees the others, marked as fixed.
    const critique = h.optimizer.requests
      .map((r) => String(r.body.messages.at(-1).content))
      .find((c) => c.includes('<template name="prompt">'));
    expect(critique).toContain("which stay as they are");
    expect(report.best.score).toBeGreaterThan(report.baseline as number);
    const latest = (await h.store.client.getLatestResources({})).resources;
    expect(Object.keys(latest?.resources ?? {}).sort()).toEqual(["_apo", "llm", "prompt", "style"]);
  });

  test("grader feedback and the rollouts' messages reach the critique request", async () => {
    const before = h.optimizer.requests.length;
    await runApo(search("feedback", { rounds: 1 }));
    const critiques = h.optimizer.requests
      .slice(before)
      .map((r) => String(r.body.messages.at(-1).content))
      .filter((c) => c.includes("<runs>"));
    expect(critiques).toHaveLength(4);
    for (const text of critiques) {
      expect(text).toMatch(/Grader feedback: expected [ABC]\d+ \(kind [abc]\), got "I am not sure\."/);
      expect(text).toMatch(/\[user\] Answer this: item \d+ \([abc]\)/);
      expect(text).toContain("[assistant] I am not sure.");
      expect(text).toContain("mean reward 0.000");
    }
  });

  test("our prompts can be replaced", async () => {
    const before = h.optimizer.requests.length;
    await runApo(
      search("custom", {
        rounds: 1,
        prompts: { critique: [{ user: "CUSTOM CRITIQUE of <template>\n{{template}}\n</template>\n{{experiments}}" }] },
      }),
    );
    const sent = h.optimizer.requests.slice(before).map((r) => r.body.messages);
    const critiques = sent.filter((m) => String(m.at(-1).content).startsWith("CUSTOM CRITIQUE"));
    expect(critiques).toHaveLength(4);
    expect(critiques.every((m) => m.length === 1)).toBe(true);
  });
});

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

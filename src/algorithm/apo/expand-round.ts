import type { JsonObject } from "@bufbuild/protobuf";
import { type Candidate, findSnapshot, publishSnapshot, readSnapshot, snapshotId, snapshotResources } from "./candidate.js";
import { optimizeStep, type StepJob, type StepRecord } from "./optimize-step.js";
import { extractTemplate } from "./apo-prompts.js";
import type { TemplateText } from "./placeholders.js";
import { createLimiter } from "./limiter.js";
import { batchKey, type SearchContext } from "./search-context.js";

/** What a round's expansion produced. */
export interface Expansion {
  /** Children with a valid edit, in job order (duplicates not yet removed). */
  children: Candidate[];
  rejected: { key: string; reason: string }[];
  /** Some steps were skipped because the token budget ran out. */
  outOfTokens: boolean;
}

/** A step found in the store (a resumed run), as its record and templates. */
async function replayStep(
  ctx: SearchContext,
  resourcesId: string,
): Promise<{ record: StepRecord; templates: Record<string, TemplateText> } | undefined> {
  if (!ctx.resumed) return undefined;
  const found = await findSnapshot(ctx.store, resourcesId);
  if (!found) return undefined;
  const { record, templates } = readSnapshot(found);
  const step: StepRecord = {
    critique: String(record.critique ?? ""),
    answer: String(record.answer ?? ""),
    calls: Number(record.calls ?? 0),
    tokens: Number(record.tokens ?? 0),
  };
  if (typeof record.rejected === "string") step.rejected = record.rejected;
  return { record: step, templates };
}

/**
 * Expands the beam: every job rolls its parent out on its training batch (all batches at once, through the
 * runners), then asks for a critique and an edit (at most `ctx.concurrency` steps at once). Each step's result is
 * published as the child's snapshot, kept or not, so a resumed run replays it instead of asking again.
 */
export async function expandRound(ctx: SearchContext, jobs: readonly StepJob[], firstOrder: number): Promise<Expansion> {
  const limit = createLimiter(ctx.concurrency);
  let outOfTokens = false;
  const results = await Promise.all(
    jobs.map(async (job) => {
      const resourcesId = snapshotId(ctx.runId, job.key);
      const parentText = job.parent.templates[job.target] as TemplateText;
      ctx.budget.spend({ rollouts: job.trainTasks.length });
      const replayed = await replayStep(ctx, resourcesId);
      let record: StepRecord | undefined;
      let templates: Record<string, TemplateText>;
      if (replayed) {
        ({ record, templates } = replayed);
        ctx.budget.spend({ optimizerCalls: record.calls, tokens: record.tokens });
      } else {
        const runs = await ctx.evaluator.evaluate(
          {
            key: batchKey(ctx.runId, `${job.key}:train`),
            resourcesId: job.parent.resourcesId,
            mode: "train",
            tasks: job.trainTasks.map((index) => ({ index, input: ctx.train[index] ?? null })),
            withMessages: true,
          },
          ctx.signal,
        );
        record = await limit(() => optimizeStep(job, runs, ctx.step));
        if (record === undefined) {
          outOfTokens = true;
          return undefined;
        }
        const edited = record.rejected === undefined ? extractTemplate(record.answer) : parentText.template;
        templates = { ...job.parent.templates, [job.target]: { template: edited, engine: parentText.engine } };
        const stored: JsonObject = {
          run: ctx.runId,
          candidate: job.key,
          round: job.round,
          parent: job.parent.key,
          target: job.target,
          train_tasks: job.trainTasks,
          critique: record.critique,
          answer: record.answer,
          calls: record.calls,
          tokens: record.tokens,
          ...(record.rejected === undefined ? {} : { rejected: record.rejected }),
        };
        await publishSnapshot(ctx.store, resourcesId, snapshotResources(templates, ctx.extra, stored));
      }
      ctx.emit({
        type: "child",
        round: job.round,
        key: job.key,
        parent: job.parent.key,
        target: job.target,
        replayed: replayed !== undefined,
        ...(record.rejected === undefined ? {} : { rejected: record.rejected }),
      });
      return { job, record, templates, resourcesId };
    }),
  );
  const children: Candidate[] = [];
  const rejected: Expansion["rejected"] = [];
  let order = firstOrder;
  for (const result of results) {
    if (!result) continue;
    const { job, record, templates, resourcesId } = result;
    if (record.rejected !== undefined) rejected.push({ key: job.key, reason: record.rejected });
    else
      children.push({
        key: job.key,
        templates,
        resourcesId,
        round: job.round,
        parentKey: job.parent.key,
        target: job.target,
        order: order++,
      });
  }
  return { children, rejected, outOfTokens };
}

import { create } from "@bufbuild/protobuf";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import {
  AttemptSchema,
  AttemptStatus,
  ResourcesUpdateSchema,
  type Rollout,
  RolloutMode,
  RolloutSchema,
  RolloutStatus,
  type Span,
  SpanSchema,
} from "../../src/gen/agl/v1/types_pb.js";
import type { StorageTx } from "../../src/store/backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";

export interface FillOptions {
  /** The SQLite database file to create. */
  path: string;
  rollouts: number;
  /** Spans of the one big rollout. */
  spans: number;
}

/** The id of the rollout of many spans. */
export const BIG_ROLLOUT_ID = "ro-big000000000";
const VERSIONS = 50;
const DAY = 86_400;

/** The store being made: its start of time (epoch seconds, a day ago) and its number of rollouts. */
interface Shape {
  t0: number;
  total: number;
}

/** A deterministic pseudo-random number in [0, 1) for item i and salt k. */
const rand = (i: number, k: number) => {
  const x = Math.sin(i * 12.9898 + k * 78.233) * 43_758.5453;
  return x - Math.floor(x);
};
const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
const tokenIds = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 31) % 150_000));

function llmSpan(t0: number, rolloutId: string, attemptId: string, seq: number, parentId: string, prompt: number, response: number): Span {
  const ids = tokenIds(response, seq);
  return plainSpan(
    t0,
    rolloutId,
    attemptId,
    seq,
    parentId,
    "chat m",
    {
      [sc.AGL_LLM_SOURCE]: attr.string("proxy"),
      [sc.GEN_AI_OPERATION_NAME]: attr.string("chat"),
      [sc.GEN_AI_RESPONSE_MODEL]: attr.string("m"),
      [sc.GEN_AI_RESPONSE_ID]: attr.string(`chatcmpl-${attemptId}-${seq}`),
      [sc.AGL_LLM_PROMPT_TOKEN_IDS]: attr.ints(tokenIds(prompt, seq + 1)),
      [sc.AGL_LLM_RESPONSE_TOKEN_IDS]: attr.ints(ids),
      [sc.AGL_LLM_LOGPROBS]: attr.doubles(ids.map((_, i) => -i / 100)),
      [sc.AGL_LLM_REQUEST]: attr.json({ model: "m", messages: [{ role: "user", content: `question ${seq}` }] }),
      [sc.AGL_LLM_RESPONSE]: attr.json({ choices: [{ message: { role: "assistant", content: `answer ${seq}` } }] }),
    },
    0.5,
  );
}

function plainSpan(
  t0: number,
  rolloutId: string,
  attemptId: string,
  seq: number,
  parentId: string,
  name: string,
  attributes: Span["attributes"] = {},
  durationSeconds = 0.2,
): Span {
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    sequenceId: seq,
    traceId: "ab".repeat(16),
    spanId: hex(seq, 16),
    parentId,
    name,
    startTime: t0 + seq,
    endTime: t0 + seq + durationSeconds,
    attributes,
  });
}

/** Rollout i: its row, its attempt (unless queued), and its spans (finished ones: two calls and a reward). */
function rolloutRows(
  shape: Shape,
  i: number,
): { rollout: Rollout; spans: Span[]; attempt?: ReturnType<typeof create<typeof AttemptSchema>> } {
  const { t0, total } = shape;
  const rolloutId = `ro-${hex(i, 12)}`;
  const attemptId = `at-${hex(i, 8)}`;
  const startTime = t0 + (i / total) * DAY;
  const r = rand(i, 1);
  // Mostly finished, as in a long training run; the newest are still queued or running.
  const recent = i > total - 200;
  const status = recent
    ? r < 0.5
      ? RolloutStatus.QUEUING
      : RolloutStatus.RUNNING
    : r < 0.8
      ? RolloutStatus.SUCCEEDED
      : r < 0.95
        ? RolloutStatus.FAILED
        : RolloutStatus.CANCELLED;
  const finished = status === RolloutStatus.SUCCEEDED || status === RolloutStatus.FAILED || status === RolloutStatus.CANCELLED;
  const endTime = finished ? startTime + 5 + rand(i, 2) * 30 : undefined;
  const rollout = create(RolloutSchema, {
    rolloutId,
    startTime,
    endTime,
    mode: rand(i, 3) < 0.9 ? RolloutMode.TRAIN : RolloutMode.VAL,
    resourcesId: "policy",
    resourcesVersion: 1 + Math.floor((i / total) * VERSIONS),
    status,
    groupId: `g-${hex(Math.floor(i / 8), 8)}`,
    config: { maxAttempts: 1 },
  });
  if (status === RolloutStatus.QUEUING) return { rollout, spans: [] };
  const attempt = create(AttemptSchema, {
    rolloutId,
    attemptId,
    sequenceId: 1,
    startTime,
    endTime,
    status:
      status === RolloutStatus.RUNNING
        ? AttemptStatus.RUNNING
        : status === RolloutStatus.FAILED
          ? AttemptStatus.FAILED
          : AttemptStatus.SUCCEEDED,
    workerId: `w-${i % 64}`,
  });
  if (!finished) return { rollout, attempt, spans: [] };
  const reward = Math.min(1, Math.max(0, (i / total) * 0.6 + rand(i, 4) * 0.4));
  const spans = [
    llmSpan(t0, rolloutId, attemptId, 1, "", 200, 40),
    llmSpan(t0, rolloutId, attemptId, 2, "", 260, 40),
    plainSpan(t0, rolloutId, attemptId, 3, "", sc.AGL_ANNOTATION, { [sc.rewardValueKey(0)]: attr.double(reward) }),
  ];
  return { rollout, attempt, spans };
}

/**
 * Fills the SQLite database at `path` (created) for the dashboard's benches, straight through the storage backend:
 * `rollouts` rollouts (mixed statuses and modes, 50 versions of the resources snapshot "policy", groups of 8, created
 * over the last day; finished ones with two LLM calls and a reward span) and one rollout of `spans` spans (LLM calls
 * with token ids and logprobs, tool spans, a reward). Resolves to that rollout's id.
 */
export async function fillDashboardStore(options: FillOptions): Promise<string> {
  const backend = createSqliteBackend({ path: options.path });
  const shape: Shape = { t0: Math.floor(Date.now() / 1000) - DAY, total: options.rollouts };
  const { t0, total } = shape;
  try {
    await backend.transaction(async (tx) => {
      for (let v = 1; v <= VERSIONS; v++) {
        await tx.putResources(create(ResourcesUpdateSchema, { resourcesId: "policy", createTime: t0, updateTime: t0 + v, version: v }));
      }
    });
    const chunk = 2_000;
    for (let from = 0; from < total; from += chunk) {
      await backend.transaction(async (tx) => {
        const rows = Array.from({ length: Math.min(chunk, total - from) }, (_, k) => rolloutRows(shape, from + k));
        await tx.insertRollouts(rows.map((row) => row.rollout));
        await tx.enqueue(rows.filter((row) => row.rollout.status === RolloutStatus.QUEUING).map((row) => row.rollout.rolloutId));
        for (const row of rows) if (row.attempt) await tx.insertAttempt(row.attempt);
        await tx.insertSpans(rows.flatMap((row) => row.spans));
      });
    }
    return await backend.transaction((tx) => bigRollout(tx, shape, options.spans));
  } finally {
    await backend.close();
  }
}

/** One rollout of `bigSpans` spans: an agent span, then LLM call, tool span, tool span… and a reward at the end. */
async function bigRollout(tx: StorageTx, shape: Shape, bigSpans: number): Promise<string> {
  const { t0 } = shape;
  const rolloutId = BIG_ROLLOUT_ID;
  const attemptId = "at-big00001";
  const rollout = rolloutRows(shape, 0).rollout;
  await tx.insertRollouts([create(RolloutSchema, { ...rollout, rolloutId, groupId: "big", status: RolloutStatus.SUCCEEDED })]);
  await tx.insertAttempt(
    create(AttemptSchema, { rolloutId, attemptId, sequenceId: 1, startTime: t0, endTime: t0 + 900, status: AttemptStatus.SUCCEEDED }),
  );
  const agent = hex(1, 16);
  const spans: Span[] = [
    plainSpan(t0, rolloutId, attemptId, 1, "", "invoke_agent solver", { [sc.GEN_AI_OPERATION_NAME]: attr.string("invoke_agent") }),
  ];
  for (let seq = 2; seq < bigSpans; seq++) {
    spans.push(
      seq % 3 === 2
        ? llmSpan(t0, rolloutId, attemptId, seq, agent, 300 + seq, 60)
        : plainSpan(t0, rolloutId, attemptId, seq, agent, "execute_tool search", {
            [sc.GEN_AI_OPERATION_NAME]: attr.string("execute_tool"),
          }),
    );
  }
  spans.push(plainSpan(t0, rolloutId, attemptId, bigSpans, agent, sc.AGL_ANNOTATION, { [sc.rewardValueKey(0)]: attr.double(1) }));
  await tx.insertSpans(spans);
  await tx.raiseSequenceId(rolloutId, bigSpans);
  return rolloutId;
}

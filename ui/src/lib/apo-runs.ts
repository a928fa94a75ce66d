import { type JsonObject, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Resource, RolloutStatus } from "../../../src/gen/agl/v1/types_pb.js";

/** The resource name under which APO keeps its record in each snapshot it publishes (src/algorithm/apo/candidate.ts). */
export const APO_RECORD = "_apo";

/** What the tree needs of a resources snapshot (the generated `ResourcesUpdate` has these fields). */
export interface SnapshotLike {
  resourcesId: string;
  version: number;
  updateTime: number;
  resources: Record<string, Resource>;
}

/** A prompt candidate of an APO run, read back from its snapshot. */
export interface ApoCandidate {
  key: string;
  resourcesId: string;
  /** 0 for the seed. */
  round: number;
  parent?: string;
  /** The template the edit changed. */
  target?: string;
  critique?: string;
  /** Why the optimizer's edit was not used, when it was not. */
  rejected?: string;
  /** Template texts by name. */
  templates: Record<string, string>;
}

export interface ApoRun {
  run: string;
  seed?: ApoCandidate;
  /** Seed first, then by round and key. */
  candidates: ApoCandidate[];
  /** The run's best snapshot (`apo-{run}-best`): which candidate, as of which round, with its score. */
  best?: { candidate: string; round: number; score?: number; resourcesId: string; version: number; templates: Record<string, string> };
}

/** APO's record in a snapshot, or undefined when the snapshot is not APO's. */
function apoRecord(snapshot: SnapshotLike): JsonObject | undefined {
  const kind = snapshot.resources[APO_RECORD]?.kind;
  if (kind?.case !== "json") return undefined;
  const value = toJson(ValueSchema, kind.value);
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value : undefined;
}

function templatesOf(snapshot: SnapshotLike): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, r] of Object.entries(snapshot.resources)) if (r.kind.case === "promptTemplate") out[name] = r.kind.value.template;
  return out;
}

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** Groups APO's snapshots by run: the seed, every child candidate with its parent and critique, and the best. */
export function readApoRuns(snapshots: readonly SnapshotLike[]): ApoRun[] {
  const runs = new Map<string, ApoRun>();
  for (const snapshot of snapshots) {
    const record = apoRecord(snapshot);
    const runId = str(record?.run);
    const key = str(record?.candidate);
    if (record === undefined || runId === undefined || key === undefined) continue;
    const run = runs.get(runId) ?? { run: runId, candidates: [] };
    runs.set(runId, run);
    const templates = templatesOf(snapshot);
    if (snapshot.resourcesId.endsWith("-best")) {
      const score = num(record.score);
      run.best = {
        candidate: key,
        round: num(record.round) ?? 0,
        resourcesId: snapshot.resourcesId,
        version: snapshot.version,
        templates,
        ...(score === undefined ? {} : { score }),
      };
      continue;
    }
    const candidate: ApoCandidate = { key, resourcesId: snapshot.resourcesId, round: num(record.round) ?? 0, templates };
    for (const field of ["parent", "target", "critique", "rejected"] as const) {
      const value = str(record[field]);
      if (value !== undefined) candidate[field] = value;
    }
    if (key === "seed") run.seed = candidate;
    run.candidates.push(candidate);
  }
  for (const run of runs.values()) {
    run.candidates.sort((a, b) => a.round - b.round || a.key.localeCompare(b.key, undefined, { numeric: true }));
  }
  return [...runs.values()].sort((a, b) => a.run.localeCompare(b.run));
}

/** A node of the candidate tree, in the shape tree charts take. */
export interface TreeNode {
  name: string;
  /** The candidate's score, when known. */
  value?: number;
  children: TreeNode[];
}

/**
 * The candidate tree: each child under its parent. Candidates whose parent is unknown hang under the root, so nothing
 * is dropped; a run without seed gets a placeholder root.
 */
export function candidateTree(run: ApoRun, scores: ReadonlyMap<string, number> = new Map()): TreeNode {
  const nodes = new Map<string, TreeNode>();
  for (const c of run.candidates) {
    const score = scores.get(c.key);
    nodes.set(c.key, { name: c.key, children: [], ...(score === undefined ? {} : { value: score }) });
  }
  const root = nodes.get("seed") ?? { name: "seed", children: [] };
  for (const c of run.candidates) {
    if (c.key === "seed") continue;
    const node = nodes.get(c.key) as TreeNode;
    const parent = (c.parent !== undefined && c.parent !== c.key ? nodes.get(c.parent) : undefined) ?? root;
    parent.children.push(node);
  }
  return root;
}

/** What the scores need of a rollout (the generated `Rollout` has these fields). */
export interface EvaluationRollout {
  rolloutId: string;
  groupId: string;
  status: RolloutStatus;
}

/** A candidate's scores, as APO computes them: the mean final reward of a batch, a rollout without one counting 0. */
export interface ApoScores {
  /** Score on the whole validation set (`apo:{run}:full:{key}`): the seed's baseline, each leader's score. */
  full: Map<string, number>;
  /** Score on each round's validation batch (`apo:{run}:r{round}:val:{key}`), by candidate. */
  rounds: { key: string; round: number; score: number }[];
}

const FINISHED = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);

/**
 * A run's scores from its validation rollouts, grouped by the batch key APO gives them as group id
 * (src/algorithm/apo/search-state.ts, run-round.ts). Unfinished rollouts are left out until they finish.
 */
export function apoScores(
  runId: string,
  rollouts: readonly EvaluationRollout[],
  finalRewards: Readonly<Record<string, number>>,
): ApoScores {
  const prefix = `apo:${runId}:`;
  const batches = new Map<string, number[]>();
  for (const r of rollouts) {
    if (!r.groupId.startsWith(prefix) || !FINISHED.has(r.status)) continue;
    const list = batches.get(r.groupId) ?? [];
    list.push(finalRewards[r.rolloutId] ?? 0);
    batches.set(r.groupId, list);
  }
  const scores: ApoScores = { full: new Map(), rounds: [] };
  for (const [group, rewards] of batches) {
    const what = group.slice(prefix.length);
    const score = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const full = /^full:(.+)$/.exec(what);
    const round = /^r(\d+):val:(.+)$/.exec(what);
    if (full?.[1] !== undefined) scores.full.set(full[1], score);
    else if (round?.[1] !== undefined && round[2] !== undefined) scores.rounds.push({ key: round[2], round: Number(round[1]), score });
  }
  scores.rounds.sort((a, b) => a.round - b.round || a.key.localeCompare(b.key, undefined, { numeric: true }));
  return scores;
}

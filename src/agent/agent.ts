import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { SpanCoreFields } from "../emitter/instant-span.js";
import type { Span } from "../gen/agl/v1/types_pb.js";
import type { Logger } from "../core/logger.js";
import type { Resources } from "./resources.js";

/** Whether a rollout is for training, validation or testing; undefined when the rollout has no mode. */
export type RolloutMode = "train" | "val" | "test";

/** What an agent's rollout receives besides the task and the resources. */
export interface RolloutContext {
  readonly rolloutId: string;
  readonly attemptId: string;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attemptSequence: number;
  readonly mode: RolloutMode | undefined;
  /** Aborted when the store cancels the rollout, its timeout passes, or the runner shuts down; `reason` says which. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
  /** The rollout's metadata and group, as enqueued. */
  readonly metadata: JsonObject;
  readonly groupId: string;
}

/**
 * What a rollout may return: a reward (a number; a boolean counts as 1 or 0), nothing (it emitted rewards itself),
 * or spans to record (emitter results built with `{ propagate: false }`, OpenTelemetry spans, or store spans).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a rollout method without a return statement is inferred as returning void
export type RolloutResult = number | boolean | void | null | undefined | readonly (SpanCoreFields | Span | object)[];

/** The signature of a rollout. */
export type RolloutFn<TTask = JsonValue> = (
  task: TTask,
  resources: Resources,
  ctx: RolloutContext,
) => RolloutResult | Promise<RolloutResult>;

/**
 * An agent: a class or object with `rollout(task, resources, ctx)`, and optionally different behaviour for training
 * (`trainingRollout`) and validation or test rollouts (`validationRollout`).
 *
 * @example
 * ```ts
 * class Calculator implements Agent<{ question: string; answer: number }> {
 *   async rollout(task, resources, ctx) { … return reward; }
 * }
 * ```
 */
export interface Agent<TTask = JsonValue> {
  /** Shown in logs and on the rollout span. */
  readonly name?: string;
  rollout(task: TTask, resources: Resources, ctx: RolloutContext): RolloutResult | Promise<RolloutResult>;
  trainingRollout?(task: TTask, resources: Resources, ctx: RolloutContext): RolloutResult | Promise<RolloutResult>;
  validationRollout?(task: TTask, resources: Resources, ctx: RolloutContext): RolloutResult | Promise<RolloutResult>;
}

/** Options of {@link rollout}. */
export interface RolloutAgentOptions {
  /** Default: the function's name. */
  name?: string;
}

/**
 * Turns a function into an agent.
 *
 * @example
 * ```ts
 * export default rollout(async (task: { q: string }, resources, ctx) => {
 *   const llm = resources.llm();
 *   …
 *   return 1; // the reward
 * });
 * ```
 */
export function rollout<TTask = JsonValue>(fn: RolloutFn<TTask>, options: RolloutAgentOptions = {}): Agent<TTask> {
  if (typeof fn !== "function") throw new TypeError("rollout() takes the agent's rollout function");
  const name = options.name ?? (fn.name || "agent");
  return { name, rollout: fn };
}

/** Picks the method for a mode: training rollouts use `trainingRollout`, others `validationRollout`, else `rollout`. */
export function rolloutMethodFor<TTask>(agent: Agent<TTask>, mode: RolloutMode | undefined): RolloutFn<TTask> {
  const special = mode === "train" ? agent.trainingRollout : mode === undefined ? undefined : agent.validationRollout;
  return (special ?? agent.rollout).bind(agent);
}

/** Whether `value` is usable as an agent. */
export function isAgent(value: unknown): value is Agent<unknown> {
  return typeof value === "object" && value !== null && typeof (value as Agent).rollout === "function";
}

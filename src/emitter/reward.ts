import { AglError } from "../core/errors.js";
import { type AttributeMap, attr } from "../tracer/attributes.js";
import { type EmitOptions, emitInstantSpan, type SpanCoreFields } from "./instant-span.js";
import { AGL_ANNOTATION, AGL_REWARD_FEEDBACK, rewardNameKey, rewardValueKey } from "../core/semconv.js";

/** Options of {@link emitReward}. */
export interface EmitRewardOptions extends EmitOptions {
  /** For a multi-dimensional reward: the dimension that is the reward (dimension 0). Required with an object. */
  primaryKey?: string;
  /** Text feedback about the outcome (prompt optimization reads it as a textual gradient). */
  feedback?: string;
}

/**
 * Records a reward in the current attempt: an `agentlightning.annotation` span with `agentlightning.reward.{i}.name`
 * and `.value` per dimension (dimension 0 is the primary one) and, optionally, `agentlightning.reward.feedback`.
 *
 * @example
 * ```ts
 * emitReward(0.8);
 * emitReward({ accuracy: 1, brevity: 0.3 }, { primaryKey: "accuracy", feedback: "correct but long" });
 * ```
 */
export function emitReward(reward: number | boolean | Record<string, number>, options: EmitRewardOptions = {}): SpanCoreFields {
  const dimensions = rewardDimensions(reward, options.primaryKey);
  const attributes: AttributeMap = {};
  dimensions.forEach(([name, value], i) => {
    attributes[rewardNameKey(i)] = attr.str(name);
    attributes[rewardValueKey(i)] = attr.double(value);
  });
  if (options.feedback !== undefined) attributes[AGL_REWARD_FEEDBACK] = attr.str(String(options.feedback));
  return emitInstantSpan("emitReward", AGL_ANNOTATION, attributes, options);
}

function rewardDimensions(reward: number | boolean | Record<string, number>, primaryKey?: string): [string, number][] {
  if (typeof reward === "boolean") return [["primary", reward ? 1 : 0]];
  if (typeof reward === "number") {
    if (!Number.isFinite(reward)) throw new AglError("invalid_argument", `reward must be a finite number, got ${reward}`);
    return [["primary", reward]];
  }
  if (reward === null || typeof reward !== "object" || Array.isArray(reward)) {
    throw new AglError("invalid_argument", `reward must be a number or an object of numbers, got ${describe(reward)}`);
  }
  const keys = Object.keys(reward);
  if (primaryKey === undefined) {
    throw new AglError("invalid_argument", "a multi-dimensional reward needs options.primaryKey (the dimension that is the reward)");
  }
  if (!keys.includes(primaryKey)) {
    throw new AglError("invalid_argument", `primaryKey "${primaryKey}" is not a dimension of the reward (${keys.join(", ")})`);
  }
  for (const key of keys) {
    const value = reward[key];
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw new AglError("invalid_argument", `reward dimension "${key}" must be a finite number, got ${describe(value)}`);
    }
  }
  return [primaryKey, ...keys.filter((k) => k !== primaryKey)].map((k) => [k, reward[k] as number]);
}

const describe = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "an array" : `${typeof v} ${String(v)}`);

/**
 * Random protobuf messages of any schema, built by reflection: every field kind, edge values (NaN, ±Infinity, -0,
 * integer extremes, unknown enum numbers, empty, very long and odd strings), lists and maps of every size the budget
 * allows. Id fields (`rollout_id`, `attempt_id`, …) mostly take ids the server handed out, so that calls reach real
 * rows rather than failing lookups.
 */
import { create, type DescField, type DescMessage, type MessageShape, ScalarType } from "@bufbuild/protobuf";
import type { Prng } from "./prng.js";

/** Ids seen in the server's answers, by kind; the generator draws from them. */
export interface IdPool {
  rollouts: string[];
  /** `[rolloutId, attemptId]` pairs. */
  attempts: Array<[string, string]>;
  resources: string[];
  workers: string[];
  groups: string[];
}

export const emptyIdPool = (): IdPool => ({ rollouts: [], attempts: [], resources: [], workers: [], groups: [] });

const oddStrings = [
  "",
  " ",
  "latest",
  "\u0000",
  "a\u0000b",
  "'; DROP TABLE rollouts; --",
  "%",
  "_",
  "\\",
  '"',
  "\ud800",
  "\udfff\ud800",
  "😀",
  "\u202e",
  "é",
  "NaN",
  "null",
  "-1",
  "ROLLOUT_STATUS_RUNNING",
  "x".repeat(256),
  "x".repeat(257),
  "y".repeat(5_000),
];
const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_.:/ ABCXYZ\u0000é😀\ud800'\"%\\\n";

const int32s = [0, 1, -1, 2, 7, 100, 1000, 2 ** 31 - 1, -(2 ** 31)];
const uint32s = [0, 1, 2, 3, 5, 100, 1000, 65_535, 2 ** 31, 2 ** 32 - 1];
const doubles = [0, -0, 1, -1, 0.5, 2, 3600, 3601, 1e10, 1e308, -1e308, 5e-324, Number.NaN, Infinity, -Infinity, 1.7976931348623157e308];
const int64s = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n + 1n];
const uint64s = [0n, 1n, 2n ** 64n - 1n, 2n ** 53n + 1n];

/** Creates a generator over `rng` and `ids`. */
export function createMessageGenerator(rng: Prng, ids: IdPool) {
  let budget = 0;
  let context: { rolloutId?: string; attemptId?: string } = {};

  const randomString = (): string => {
    if (rng.chance(0.2)) return rng.pick(oddStrings);
    const n = rng.chance(0.9) ? rng.int(0, 24) : rng.int(25, 400);
    let s = "";
    for (let i = 0; i < n; i++) s += alphabet[rng.int(0, alphabet.length - 1)];
    return s;
  };
  const hex = (n: number) => Array.from(rng.bytes(n / 2), (b) => b.toString(16).padStart(2, "0")).join("");

  /** A string for a field, by its name: ids come mostly from the pool. */
  const stringFor = (name: string): string => {
    const lower = name.toLowerCase();
    if (rng.chance(0.8)) {
      if (lower.startsWith("rollout") && context.rolloutId !== undefined) return context.rolloutId;
      if (lower.startsWith("attempt") && context.attemptId !== undefined) return rng.chance(0.1) ? "latest" : context.attemptId;
      if (lower.startsWith("resources") && ids.resources.length > 0) return rng.pick(ids.resources);
      if (lower.startsWith("worker") && ids.workers.length > 0) return rng.pick(ids.workers);
      if (lower.startsWith("group") && ids.groups.length > 0) return rng.pick(ids.groups);
      if (lower === "spanid" || lower === "parentid") return hex(16);
      if (lower === "traceid") return hex(32);
    }
    return randomString();
  };

  const scalar = (type: ScalarType, name: string): unknown => {
    switch (type) {
      case ScalarType.STRING:
        return stringFor(name);
      case ScalarType.BYTES:
        return rng.bytes(rng.int(0, 24));
      case ScalarType.BOOL:
        return rng.chance(0.5);
      case ScalarType.DOUBLE:
        return rng.chance(0.6) ? rng.pick(doubles) : (rng.next() - 0.3) * 10 ** rng.int(0, 6);
      case ScalarType.FLOAT:
        return Math.fround(rng.chance(0.6) ? rng.pick(doubles) : (rng.next() - 0.3) * 1000);
      case ScalarType.INT32:
      case ScalarType.SINT32:
      case ScalarType.SFIXED32:
        return rng.chance(0.7) ? rng.pick(int32s) : rng.int(-(2 ** 31), 2 ** 31 - 1);
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return rng.chance(0.7) ? rng.pick(uint32s) : rng.int(0, 2 ** 32 - 1);
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return rng.chance(0.7) ? rng.pick(uint64s) : BigInt(rng.int(0, 2 ** 31));
      default:
        return rng.chance(0.7) ? rng.pick(int64s) : BigInt(rng.int(-(2 ** 31), 2 ** 31));
    }
  };

  const enumValue = (field: DescField): number => {
    const values = (field.enum as NonNullable<DescField["enum"]>).values.map((v) => v.number);
    return rng.chance(0.85) ? rng.pick(values) : rng.pick([-1, 99, 2 ** 31 - 1, rng.int(0, 1000)]);
  };

  const count = (depth: number): number => {
    if (rng.chance(0.3)) return 0;
    if (rng.chance(0.8)) return rng.int(1, 3);
    if (depth <= 1 && budget > 500 && rng.chance(0.3)) return rng.int(100, 1_200);
    return rng.int(4, 20);
  };

  /** Any JSON (and numbers JSON cannot carry): what a google.protobuf.Struct field holds in protobuf-es. */
  const json = (depth: number): unknown => {
    budget--;
    // Now and then far deeper than the store accepts.
    if (depth === 1 && rng.chance(0.02)) {
      let deep: unknown = 1;
      for (let i = rng.int(20, 60); i > 0; i--) deep = rng.chance(0.5) ? [deep] : { d: deep };
      return deep;
    }
    const kind = depth > 3 || budget <= 0 ? rng.int(0, 3) : rng.int(0, 5);
    if (kind === 0) return null;
    if (kind === 1) return rng.chance(0.5);
    if (kind === 2) return rng.chance(0.5) ? rng.pick(doubles) : rng.int(-1000, 1000);
    if (kind === 3) return randomString();
    if (kind === 4) return Array.from({ length: count(depth + 1) }, () => json(depth + 1));
    return jsonObject(depth + 1);
  };
  const jsonObject = (depth: number): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (let i = count(depth); i > 0; i--) out[randomString()] = json(depth);
    return out;
  };

  const single = (field: DescField, kind: "scalar" | "enum" | "message", depth: number): unknown => {
    budget--;
    if (kind === "enum") return enumValue(field);
    // A Struct field (outside google.protobuf.Value) is a plain JSON object in protobuf-es.
    if (kind === "message" && field.message?.typeName === "google.protobuf.Struct" && field.parent.typeName !== "google.protobuf.Value") {
      return jsonObject(depth + 1);
    }
    if (kind === "message") return init(field.message as DescMessage, depth + 1);
    return scalar(field.scalar as ScalarType, field.localName);
  };

  const randomValue = (field: DescField, depth: number): unknown => {
    switch (field.fieldKind) {
      case "scalar":
      case "enum":
      case "message":
        return single(field, field.fieldKind, depth);
      case "list":
        return Array.from({ length: count(depth) }, () => single(field, field.listKind, depth));
      case "map": {
        const out: Record<string, unknown> = {};
        for (let i = count(depth); i > 0; i--) {
          const key = field.mapKey === ScalarType.STRING ? randomString() : String(scalar(field.mapKey, ""));
          out[key] = single(field, field.mapKind, depth);
        }
        return out;
      }
    }
  };

  function init(schema: DescMessage, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    // Deep or over budget: the message stays empty (recursive types such as google.protobuf.Value end here).
    if (depth > 6 || budget <= 0) return out;
    for (const member of schema.members) {
      if (member.kind === "oneof") {
        if (rng.chance(0.3)) continue;
        const field = rng.pick(member.fields);
        out[member.localName] = { case: field.localName, value: randomValue(field, depth) };
      } else if (rng.chance(depth === 0 ? 0.75 : 0.5)) {
        out[member.localName] = randomValue(member, depth);
      }
    }
    return out;
  }

  return {
    /** A random message of `schema` (its ids drawn for one rollout and attempt of the pool, mostly). */
    message<T extends DescMessage>(schema: T): MessageShape<T> {
      budget = 3_000;
      const pair = ids.attempts.length > 0 && rng.chance(0.7) ? rng.pick(ids.attempts) : undefined;
      const rolloutId = pair?.[0] ?? (ids.rollouts.length > 0 ? rng.pick(ids.rollouts) : undefined);
      context = { ...(rolloutId === undefined ? {} : { rolloutId }), ...(pair ? { attemptId: pair[1] } : {}) };
      return create(schema, init(schema, 0) as never) as MessageShape<T>;
    },
  };
}

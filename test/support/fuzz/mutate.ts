/**
 * Mutations of valid requests, the way broken clients and networks damage them: protobuf bytes with flipped bits,
 * cuts, splices, bogus tags and lengths; JSON with wrong types, unknown fields, damaged text.
 */
import type { Prng } from "./prng.js";

const concat = (...parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));

function varint(n: number): Uint8Array {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Uint8Array.from(out);
}

/** A field with a random number, wire type and payload, bogus ones included (groups, lengths past the end). */
function randomField(rng: Prng): Uint8Array {
  const number = rng.chance(0.6) ? rng.int(1, 20) : rng.int(1, 2 ** 29 - 1);
  const wire = rng.int(0, 7);
  const tag = varint(number * 8 + wire);
  switch (wire) {
    case 0:
      return concat(
        tag,
        rng.chance(0.2) ? Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) : varint(rng.int(0, 2 ** 31)),
      );
    case 1:
      return concat(tag, rng.bytes(8));
    case 2: {
      const payload = rng.bytes(rng.int(0, 16));
      const length = rng.chance(0.2) ? rng.int(17, 2 ** 31) : payload.length;
      return concat(tag, varint(length), payload);
    }
    case 5:
      return concat(tag, rng.bytes(4));
    default:
      return concat(tag, rng.bytes(rng.int(0, 4)));
  }
}

/** One to three random mutations of `bytes`. */
export function mutateBytes(rng: Prng, bytes: Uint8Array): Uint8Array {
  let out = Uint8Array.from(bytes);
  for (let n = rng.int(1, 3); n > 0; n--) {
    const at = out.length === 0 ? 0 : rng.int(0, out.length - 1);
    switch (rng.int(0, 7)) {
      case 0: // flip bits
        if (out.length > 0) for (let i = rng.int(1, 8); i > 0; i--) out[rng.int(0, out.length - 1)]! ^= 1 << rng.int(0, 7);
        break;
      case 1: // cut short
        out = out.slice(0, at);
        break;
      case 2: // insert noise
        out = concat(out.slice(0, at), rng.bytes(rng.int(1, 16)), out.slice(at));
        break;
      case 3: // repeat a slice (a repeated field, a merged message)
        out = concat(out.slice(0, at), out.slice(at, at + rng.int(1, 64)), out.slice(at));
        break;
      case 4: // a varint that never ends, or a byte at its extreme
        if (out.length > 0) out[at] = rng.pick([0x80, 0xff, 0x00, 0x7f]);
        break;
      case 5: // a bogus field appended or prepended
        out = rng.chance(0.5) ? concat(out, randomField(rng)) : concat(randomField(rng), out);
        break;
      case 6: // the message twice (protobuf merges)
        out = concat(out, out);
        break;
      default: // drop a slice
        out = concat(out.slice(0, at), out.slice(at + rng.int(1, 32)));
    }
  }
  return out;
}

/** Random JSON of any shape. */
export function randomJson(rng: Prng, depth = 0): unknown {
  const kind = depth > 3 ? rng.int(0, 3) : rng.int(0, 5);
  if (kind === 0) return null;
  if (kind === 1) return rng.chance(0.5);
  if (kind === 2) return rng.pick([0, -1, 1.5, 2 ** 53, 1e308, -0, 4294967296, 2 ** 53 + 2]);
  if (kind === 3) return rng.pick(["", "x", "NaN", "Infinity", "-1", "1e999", "ROLLOUT_STATUS_RUNNING", "latest", "\u0000", "😀", "AAAA"]);
  if (kind === 4) return Array.from({ length: rng.int(0, 4) }, () => randomJson(rng, depth + 1));
  const out: Record<string, unknown> = {};
  for (let i = rng.int(0, 4); i > 0; i--)
    out[rng.pick(["rolloutId", "rollout_id", "rollouts", "status", "spans", "page", "x", "@type", "__proto__", "constructor"])] =
      randomJson(rng, depth + 1);
  return out;
}

/** A mutation of a JSON value: a field gets a value of another type, is removed, or an unknown one is added. */
export function mutateJson(rng: Prng, value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== "object" || depth > 4) return rng.chance(0.5) ? randomJson(rng) : value;
  if (Array.isArray(value)) {
    if (value.length === 0 || rng.chance(0.2)) return [...value, randomJson(rng, 2)];
    const copy = [...value];
    const i = rng.int(0, copy.length - 1);
    copy[i] = mutateJson(rng, copy[i], depth + 1);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const choice = rng.int(0, 3);
  if (keys.length === 0 || choice === 0) copy[rng.pick(["unknownField", "rollout_id", "page", "status", "spans"])] = randomJson(rng, 2);
  else if (choice === 1) delete copy[rng.pick(keys)];
  else {
    const key = rng.pick(keys);
    copy[key] = mutateJson(rng, copy[key], depth + 1);
  }
  return copy;
}

/** Damages JSON text: cut short, a character replaced, invalid UTF-8, a deep nest, or plain garbage. */
export function mutateText(rng: Prng, text: string): Uint8Array {
  const bytes = new TextEncoder().encode(text);
  switch (rng.int(0, 5)) {
    case 0:
      return bytes.slice(0, rng.int(0, bytes.length));
    case 1: {
      const out = Uint8Array.from(bytes);
      if (out.length > 0) out[rng.int(0, out.length - 1)] = rng.pick([0x22, 0x7b, 0x7d, 0x5b, 0x2c, 0x3a, 0x00, 0xff, 0xc3]);
      return out;
    }
    case 2:
      return concat(bytes, Uint8Array.from([0xc3, 0x28, 0xff]));
    case 3: {
      const depth = rng.int(100, 5_000);
      return new TextEncoder().encode(`{"rollouts":${"[".repeat(depth)}${"]".repeat(rng.chance(0.5) ? depth : 0)}}`);
    }
    case 4:
      return rng.bytes(rng.int(0, 64));
    default:
      return mutateBytes(rng, bytes);
  }
}

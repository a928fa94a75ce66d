/** Strings read as protobuf-es's reader reads them (src/encoding/short-strings.ts): the same value, the same error, the same position. */
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { readString } from "../../src/encoding/short-strings.js";

/** What a read gives: the string and where the reader stands after it, or the error's message. */
function outcome(read: (r: BinaryReader, bytes: Uint8Array) => string, bytes: Uint8Array) {
  const r = new BinaryReader(bytes);
  try {
    return { value: read(r, bytes), pos: r.pos };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

const prefixed = (body: Uint8Array, length = body.length) => {
  const w = new BinaryWriter();
  w.uint32(length);
  w.raw(body);
  return w.finish();
};

describe("readString", () => {
  it("reads what protobuf-es reads, strict or not: every length around the short ones, ASCII or not, whole or cut", () => {
    const cases: Uint8Array[] = [];
    for (let n = 0; n <= 40; n++) {
      const ascii = Uint8Array.from({ length: n }, (_, i) => 32 + ((i * 37 + n) % 95));
      cases.push(prefixed(ascii));
      if (n > 0) {
        cases.push(prefixed(Uint8Array.from(ascii, (c, i) => (i === n - 1 ? 0xe9 : c)))); // a lone Latin-1 byte: not UTF-8
        cases.push(prefixed(new TextEncoder().encode(`${"a".repeat(n - 1)}é`))); // two bytes of valid UTF-8
        cases.push(prefixed(ascii, n + 1)); // runs past the end
        cases.push(prefixed(ascii).subarray(0, n)); // cut inside
      }
    }
    cases.push(new Uint8Array(0)); // nothing to read
    cases.push(Uint8Array.from([0x80])); // a length that does not end
    let compared = 0;
    for (const bytes of cases) {
      for (const strict of [true, false]) {
        const theirs = outcome((r) => r.string(strict), bytes);
        expect(outcome((r, b) => readString(r, b, strict), bytes)).toEqual(theirs);
        compared++;
      }
    }
    expect(compared).toBe(2 * (41 + 4 * 40 + 2));
  });

  it("reads from where the reader stands, inside a larger message", () => {
    const w = new BinaryWriter();
    w.uint32(7).string("ro-0c63269c01a7").string("x".repeat(33)).string("");
    const bytes = w.finish();
    const r = new BinaryReader(bytes);
    r.uint32();
    expect([readString(r, bytes, true), readString(r, bytes, true), readString(r, bytes, true)]).toEqual([
      "ro-0c63269c01a7",
      "x".repeat(33),
      "",
    ]);
    expect(r.pos).toBe(bytes.length);
  });
});

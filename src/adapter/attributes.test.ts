/** Attribute values as written to spans and read back. */
import { describe, expect, it } from "vitest";
import { attr, attrDoubles, attrInts, attrJson, attrString } from "./attributes.js";

describe("attribute values", () => {
  it("keeps int arrays exact, token ids and the rest alike", () => {
    const values = [0, 1, 151_643, 262_143, 262_144, 2 ** 40, -3, Number.MAX_SAFE_INTEGER];
    const written = attr.ints([...values, 7n]);
    expect(written.value.case).toBe("intArray");
    expect(written.value.case === "intArray" && written.value.value.values).toEqual([...values.map(BigInt), 7n]);
    expect(attrInts({ ids: written }, "ids")).toEqual([...values, 7]);
    // Ids seen again come out the same.
    expect(attrInts({ ids: attr.ints([151_643, 1]) }, "ids")).toEqual([151_643, 1]);
    expect(() => attr.ints([1.5])).toThrow(RangeError);
  });

  it("builds messages that read back through the accessors", () => {
    const attrs = { s: attr.string("x"), d: attr.doubles([0.5, -1]), j: attr.json({ a: [1] }) };
    expect(attrs.s.$typeName).toBe("agl.v1.AttributeValue");
    expect(attrString(attrs, "s")).toBe("x");
    expect(attrDoubles(attrs, "d")).toEqual([0.5, -1]);
    expect(attrJson(attrs, "j")).toEqual({ a: [1] });
  });
});

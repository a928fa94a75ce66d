import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AddSpansRequestSchema, UpdateRolloutRequestSchema } from "../gen/agl/v1/store_pb.js";
import { wellFormed, withWellFormedText } from "./well-formed-text.js";

describe("withWellFormedText", () => {
  it("replaces lone surrogates everywhere, keeps pairs, and never touches the caller's objects", () => {
    expect(wellFormed("a\ud800b\udc00c\ud83d\ude00")).toBe("a\ufffdb\ufffdc\ud83d\ude00");
    const metadata = JSON.parse('{"__proto__": {"x": "a\\ud800"}, "k\\udc00": ["\\ud800", 1]}');
    const request = { rolloutId: "ro-\ud800", metadata };
    const out = withWellFormedText(UpdateRolloutRequestSchema, request) as typeof request;
    expect(out.rolloutId).toBe("ro-\ufffd");
    expect(JSON.stringify(out.metadata)).toBe(JSON.stringify({ ["__proto__"]: { x: "a\ufffd" }, "k\ufffd": ["\ufffd", 1] }));
    // A `__proto__` key stays data, never a prototype.
    expect(Object.getPrototypeOf(out.metadata)).toBe(Object.prototype);
    expect(request.rolloutId).toBe("ro-\ud800");
    expect(Object.keys(metadata)).toEqual(["__proto__", "k\udc00"]);
  });

  it("returns the very request when its text is well-formed", () => {
    const request = create(AddSpansRequestSchema, {
      spans: [{ rolloutId: "r", name: "emoji \ud83d\ude00", attributes: { k: { value: { case: "stringValue", value: "v" } } } }],
    });
    expect(withWellFormedText(AddSpansRequestSchema, request)).toBe(request);
  });
});

import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createCredentials, parseTokenFile, parseTokenSpec } from "./credentials.js";

const codeOf = (fn: () => unknown) => {
  try {
    fn();
    return "ok";
  } catch (error) {
    return ConnectError.from(error).code;
  }
};

describe("credentials", () => {
  it("reads --token values: SCOPE=TOKEN, anything else is an admin token", () => {
    expect(parseTokenSpec("runner=abc")).toEqual({ scope: "runner", token: "abc" });
    expect(parseTokenSpec("abc")).toEqual({ scope: "admin", token: "abc" });
    expect(parseTokenSpec("a=b")).toEqual({ scope: "admin", token: "a=b" });
  });

  it("reads token files and names the line of a bad entry", () => {
    expect(parseTokenFile("# fleet\nrunner: r1\n\ntrainer:t1\n", "t.txt")).toEqual([
      { scope: "runner", token: "r1" },
      { scope: "trainer", token: "t1" },
    ]);
    expect(() => parseTokenFile("runner:r1\nroot:x\n", "t.txt")).toThrow(/^t\.txt:2: expected 'scope:token'/);
    expect(() => parseTokenFile("# nothing\n", "t.txt")).toThrow(/no tokens/);
  });

  it("refuses one token with two scopes, and checks scopes (admin may do everything)", () => {
    expect(() =>
      createCredentials([
        { scope: "runner", token: "x" },
        { scope: "admin", token: "x" },
      ]),
    ).toThrow(/two scopes/);
    const c = createCredentials([
      { scope: "runner", token: "r" },
      { scope: "admin", token: "a" },
    ]);
    expect(c.scopeOf("Bearer r")).toBe("runner");
    expect(codeOf(() => c.scopeOf("Bearer x"))).toBe(Code.Unauthenticated);
    expect(codeOf(() => c.scopeOf(undefined))).toBe(Code.Unauthenticated);
    expect(codeOf(() => c.authorize("Bearer r", ["trainer"], "X"))).toBe(Code.PermissionDenied);
    expect(() => c.authorize("Bearer r", ["trainer", "reader"], "X")).toThrow(
      "X needs scope trainer or reader or admin; this token has scope runner",
    );
    expect(c.authorize("Bearer a", [], "X")).toBe("admin");
  });
});

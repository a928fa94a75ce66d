import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { withRetries } from "./retry.js";

const failing = (times: number, code = Code.Unavailable) => {
  let calls = 0;
  const fn = async () => {
    calls++;
    if (calls <= times) throw new ConnectError("store unreachable", code);
    return calls;
  };
  return { fn, calls: () => calls };
};

describe("withRetries", () => {
  it("gives up after 5 tries by default", async () => {
    const f = failing(10);
    await expect(withRetries(f.fn, { baseMs: 1 })).rejects.toThrow(/store unreachable/);
    expect(f.calls()).toBe(5);
  });

  it("with forMs, keeps trying through an outage however many tries it takes", async () => {
    const f = failing(8);
    expect(await withRetries(f.fn, { baseMs: 1, forMs: 10_000 })).toBe(9);
  });

  it("with forMs, gives up once that long has passed", async () => {
    const f = failing(Number.POSITIVE_INFINITY);
    const started = performance.now();
    await expect(withRetries(f.fn, { baseMs: 10, forMs: 200 })).rejects.toThrow(/store unreachable/);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(195);
    expect(elapsed).toBeLessThan(2_000);
    expect(f.calls()).toBeGreaterThan(3);
  });

  it("never retries an error that is not transient", async () => {
    const f = failing(1, Code.InvalidArgument);
    await expect(withRetries(f.fn, { forMs: 10_000 })).rejects.toThrow(/store unreachable/);
    expect(f.calls()).toBe(1);
  });
});

import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { backoffMs, withRetries } from "./retry.js";

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

describe("withRetries with a predicate", () => {
  it("retries what `retryable` accepts, waits what `delayMs` says, and counts through onRetry", async () => {
    let calls = 0;
    const retried: number[] = [];
    const result = await withRetries(
      async () => {
        if (++calls < 3) throw new Error("busy");
        return "done";
      },
      { retryable: (error) => (error as Error).message === "busy", delayMs: () => 1, onRetry: (_error, n) => retried.push(n) },
    );
    expect(result).toBe("done");
    expect(retried).toEqual([1, 2]);
  });

  it("stops at once when the signal aborts during a wait, throwing the last error", async () => {
    const controller = new AbortController();
    const f = failing(Number.POSITIVE_INFINITY);
    setTimeout(() => controller.abort(), 50);
    await expect(withRetries(f.fn, { baseMs: 60_000, maxMs: 60_000, signal: controller.signal })).rejects.toThrow(/store unreachable/);
    expect(f.calls()).toBe(1);
  });
});

describe("backoffMs", () => {
  it("doubles up to the cap with jitter, and follows Retry-After (capped)", () => {
    for (let n = 1; n <= 6; n++) {
      const ms = backoffMs(n, 100, 1_000);
      const ceiling = Math.min(100 * 2 ** (n - 1), 1_000);
      expect(ms).toBeGreaterThanOrEqual(ceiling / 2);
      expect(ms).toBeLessThanOrEqual(ceiling);
    }
    expect(backoffMs(1, 100, 10_000, "2")).toBe(2_000);
    expect(backoffMs(1, 100, 1_000, ["30"])).toBe(1_000);
  });
});

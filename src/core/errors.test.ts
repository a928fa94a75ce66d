import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AglError } from "./errors.js";

describe("AglError.from", () => {
  it("keeps an AglError as it is", () => {
    const error = new AglError("empty_dataset", "no rows");
    expect(AglError.from(error, "internal")).toBe(error);
  });

  it("maps aborts (DOMException or Error named AbortError) to aborted, and timeouts to deadline_exceeded", () => {
    const controller = new AbortController();
    controller.abort();
    expect(AglError.from(controller.signal.reason).code).toBe("aborted");
    expect(AglError.from(new DOMException("the rollout was cancelled", "AbortError"))).toMatchObject({
      code: "aborted",
      message: "the rollout was cancelled",
    });
    expect(AglError.from(Object.assign(new Error("stop"), { name: "AbortError" })).code).toBe("aborted");
    expect(AglError.from(new DOMException("too slow", "TimeoutError")).code).toBe("deadline_exceeded");
  });

  it("maps ConnectError codes, keeping the raw message and the cause", () => {
    const unavailable = new ConnectError("connection refused", Code.Unavailable);
    expect(AglError.from(unavailable)).toMatchObject({ code: "unavailable", message: "connection refused", cause: unavailable });
    expect(AglError.from(new ConnectError("gone", Code.NotFound)).code).toBe("not_found");
    expect(AglError.from(new ConnectError("x", Code.Canceled)).code).toBe("aborted");
    expect(AglError.from(new ConnectError("x", Code.DataLoss), "optimizer_failed").code).toBe("optimizer_failed");
  });

  it("uses the fallback code (internal unless given) for anything else", () => {
    expect(AglError.from(new TypeError("bad"))).toMatchObject({ code: "internal", message: "bad", name: "AglError" });
    expect(AglError.from("a string", "agent_load")).toMatchObject({ code: "agent_load", message: "a string" });
  });
});

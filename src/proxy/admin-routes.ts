import type * as http from "node:http";
import { readRequestBody, sendError, sendJson } from "./http-io.js";
import type { PauseOptions } from "./pause-gate.js";

/** What the admin routes act on. */
export interface AdminTarget {
  pause(options?: PauseOptions): void;
  resume(): void;
  drain(timeoutMs?: number): Promise<boolean>;
  status(): unknown;
}

/**
 * The admin routes:
 * - `GET /proxy/status`: paused or not, in-flight and waiting counts, backends, counters;
 * - `POST /proxy/pause` `{"mode": "wait"|"reject", "retry_after_seconds": n, "drain": bool, "timeout_ms": n}`: pause,
 *   and with `drain` answer only once no call is in flight (`"drained": false` if `timeout_ms` passed first);
 * - `POST /proxy/drain` `{"timeout_ms": n}`: wait until no call is in flight;
 * - `POST /proxy/resume`.
 */
export async function handleAdmin(
  target: AdminTarget,
  action: "status" | "pause" | "resume" | "drain",
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  let body: Record<string, unknown> = {};
  if (action !== "status") {
    const raw = (await readRequestBody(req, 64 * 1024)).toString("utf8").trim();
    if (raw !== "") {
      try {
        const parsed: unknown = JSON.parse(raw);
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
        body = parsed as Record<string, unknown>;
      } catch {
        return sendError(res, 400, "invalid_json", "the admin request body must be a JSON object (or empty)");
      }
    }
  }
  const timeoutMs = typeof body.timeout_ms === "number" ? body.timeout_ms : undefined;
  switch (action) {
    case "status":
      return sendJson(res, 200, target.status());
    case "pause": {
      const mode = body.mode ?? "wait";
      if (mode !== "wait" && mode !== "reject")
        return sendError(res, 400, "invalid_mode", `mode must be "wait" or "reject", got ${JSON.stringify(mode)}`);
      const retry = typeof body.retry_after_seconds === "number" ? { retryAfterSeconds: body.retry_after_seconds } : {};
      target.pause({ mode, ...retry });
      const drained = body.drain === true ? await target.drain(timeoutMs) : undefined;
      return sendJson(res, 200, { ...(target.status() as object), ...(drained === undefined ? {} : { drained }) });
    }
    case "drain": {
      const drained = await target.drain(timeoutMs);
      return sendJson(res, 200, { ...(target.status() as object), drained });
    }
    case "resume":
      target.resume();
      return sendJson(res, 200, target.status());
  }
}

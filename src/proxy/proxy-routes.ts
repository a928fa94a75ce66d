import type { ApiName } from "./client-api.js";
import type { CallScope } from "./scope-check.js";

/** A request the proxy serves. */
export type ProxyRoute =
  | { kind: "call"; call: ApiName; scope: CallScope | undefined }
  | { kind: "models"; scope: CallScope | undefined }
  | { kind: "count_tokens"; scope: CallScope | undefined }
  | { kind: "admin"; action: "status" | "pause" | "resume" | "drain" }
  | { kind: "method_not_allowed"; allow: string };

const scoped = /^\/rollout\/([^/]+)\/attempt\/([^/]+)(\/.*)?$/;
const admin = new Map<string, { action: "status" | "pause" | "resume" | "drain"; method: string }>([
  ["/proxy/status", { action: "status", method: "GET" }],
  ["/proxy/pause", { action: "pause", method: "POST" }],
  ["/proxy/resume", { action: "resume", method: "POST" }],
  ["/proxy/drain", { action: "drain", method: "POST" }],
] as const);
/** The LLM call paths (after `/v1`), by the API they speak; a new API is one more entry. */
const calls = new Map<string, ApiName>([
  ["/chat/completions", "chat"],
  ["/completions", "completions"],
  ["/responses", "responses"],
  ["/messages", "messages"],
]);

/**
 * Routes a request: the LLM API paths (`/v1/chat/completions`, `/v1/completions`, `/v1/responses`, `/v1/messages`,
 * `/v1/models`, also without `/v1`), the same under `/rollout/{rollout_id}/attempt/{attempt_id}`, and the admin paths under `/proxy/`.
 * Undefined for anything else.
 */
export function routeRequest(method: string, url: string): ProxyRoute | undefined {
  const q = url.indexOf("?");
  let path = q < 0 ? url : url.slice(0, q);
  const adminRoute = admin.get(path);
  if (adminRoute) {
    return method === adminRoute.method
      ? { kind: "admin", action: adminRoute.action }
      : { kind: "method_not_allowed", allow: adminRoute.method };
  }
  let scope: CallScope | undefined;
  const m = scoped.exec(path);
  if (m) {
    scope = { rolloutId: decode(m[1] as string), attemptId: decode(m[2] as string) };
    path = m[3] ?? "/";
  }
  if (path.startsWith("/v1/")) path = path.slice(3);
  path = path.replace(/\/+$/, "");
  const call = calls.get(path);
  if (call) return method === "POST" ? { kind: "call", call, scope } : { kind: "method_not_allowed", allow: "POST" };
  if (path === "/models") return method === "GET" ? { kind: "models", scope } : { kind: "method_not_allowed", allow: "GET" };
  if (path === "/messages/count_tokens")
    return method === "POST" ? { kind: "count_tokens", scope } : { kind: "method_not_allowed", allow: "POST" };
  return undefined;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

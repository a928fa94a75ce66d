import { RolloutStatus } from "../gen/agl/v1/types_pb.js";
import type { Scope } from "./credentials.js";

/** Who may call an RPC: these scopes (and `admin`, always), and `runner` too for requests `runnerMay` accepts. */
export interface RpcAccess {
  scopes: readonly Scope[];
  /** A narrower grant to runners: only requests of this shape (checked on the request message). */
  runnerMay?: { when: (request: unknown) => boolean; what: string };
}

const R = "runner";
const T = "trainer";
const D = "reader";

/**
 * The scope every RPC of the contract needs, by `Service/Method` (`docs/running-the-store.md` lists the same table;
 * `test/server/scope-matrix.test.ts` checks that every method of the served services is here). A method missing from
 * the table is `admin`-only.
 */
export const RPC_SCOPES: Readonly<Record<string, RpcAccess>> = {
  "agl.v1.LightningStore/EnqueueRollouts": { scopes: [T] },
  "agl.v1.LightningStore/DequeueRollouts": { scopes: [R] },
  "agl.v1.LightningStore/StartRollout": { scopes: [T] },
  "agl.v1.LightningStore/StartAttempt": { scopes: [T] },
  "agl.v1.LightningStore/GetRollout": { scopes: [R, T, D] },
  "agl.v1.LightningStore/QueryRollouts": { scopes: [T, D] },
  "agl.v1.LightningStore/UpdateRollout": {
    scopes: [T],
    // A runner hands a claimed rollout back when it shuts down; it never cancels or edits one.
    runnerMay: { when: isHandBack, what: "only to set status REQUEUING" },
  },
  "agl.v1.LightningStore/WaitForRollouts": { scopes: [T, D] },
  "agl.v1.LightningStore/QueryAttempts": { scopes: [T, D] },
  "agl.v1.LightningStore/GetLatestAttempt": { scopes: [T, D] },
  "agl.v1.LightningStore/UpdateAttempt": { scopes: [R] },
  // The proxy records LLM calls as spans with the trainer's credentials.
  "agl.v1.LightningStore/AddSpans": { scopes: [R, T] },
  "agl.v1.LightningStore/AddSpansStream": { scopes: [R, T] },
  "agl.v1.LightningStore/QuerySpans": { scopes: [T, D] },
  "agl.v1.LightningStore/ExpectSpans": { scopes: [R, T] },
  "agl.v1.LightningStore/NextSpanSequenceIds": { scopes: [R, T] },
  "agl.v1.LightningStore/UpdateWorker": { scopes: [R] },
  "agl.v1.LightningStore/GetWorker": { scopes: [R, T, D] },
  "agl.v1.LightningStore/QueryWorkers": { scopes: [T, D] },
  "agl.v1.LightningStore/GetStatistics": { scopes: [T, D] },
  "agl.v1.LightningStore/GetRolloutTimeline": { scopes: [T, D] },
  "agl.v1.LightningStore/GetRewardsByResources": { scopes: [T, D] },
  "agl.v1.ResourceService/AddResources": { scopes: [T] },
  "agl.v1.ResourceService/UpdateResources": { scopes: [T] },
  "agl.v1.ResourceService/GetResources": { scopes: [R, T, D] },
  "agl.v1.ResourceService/GetLatestResources": { scopes: [R, T, D] },
  "agl.v1.ResourceService/QueryResources": { scopes: [T, D] },
  "agl.v1.ResourceService/QueryResourceVersions": { scopes: [T, D] },
  "agl.v1.ResourceService/WatchResources": { scopes: [R, T, D] },
  "agl.v1.TripletService/StreamTriplets": { scopes: [T] },
  "agl.v1.TripletService/GetRolloutTriplets": { scopes: [T, D] },
  "agl.v1.TripletService/GetRolloutMessages": { scopes: [T, D] },
  // Any token may open the stream; each call it carries needs the scope of its own method.
  "agl.v1.CallStream/Calls": { scopes: [R, T, D] },
};

/** Plain HTTP routes beside the RPCs, by route name (the LLM proxy adds its own: `PROXY_ROUTE_SCOPES`). */
export const HTTP_ROUTE_SCOPES = {
  /** `POST /v1/traces`: OTLP/HTTP span ingest from agents. */
  otlp: [R, T],
} as const satisfies Record<string, readonly Scope[]>;

function isHandBack(request: unknown): boolean {
  const r = request as Record<string, unknown> | null;
  if (r === null || typeof r !== "object" || r.status !== RolloutStatus.REQUEUING) return false;
  return ["input", "mode", "resourcesId", "config", "metadata"].every((key) => r[key] === undefined);
}

import type { JsonValue } from "@bufbuild/protobuf";
import type { Logger } from "../core/logger.js";
import type { StoreApi } from "../store/store-api.js";

/** What an algorithm works with: the store (its only channel to runners) and a logger. */
export interface AlgorithmContext {
  store: StoreApi;
  logger: Logger;
  /** Aborted when the trainer stops early. */
  signal?: AbortSignal;
}

/** The tasks an algorithm trains and validates on: any JSON values, one per rollout. */
export interface Datasets {
  train?: readonly JsonValue[];
  val?: readonly JsonValue[];
}

/** An algorithm: publishes resources, enqueues rollouts, reads what they produced, and reports. */
export interface Algorithm<TReport = unknown> {
  readonly name: string;
  run(ctx: AlgorithmContext, data: Datasets): Promise<TReport>;
}

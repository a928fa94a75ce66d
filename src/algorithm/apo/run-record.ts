import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { StoreApi } from "../../store/store-api.js";
import { AglError } from "../../core/errors.js";
import { type ResourceInit, findSnapshot, publishSnapshot, readSnapshot, snapshotId, snapshotResources } from "./candidate.js";
import type { TemplateText } from "./placeholders.js";

/** What decides a run's path: a resumed run must have the same (rounds and budget may change). */
export interface RunIdentity {
  templates: Record<string, TemplateText>;
  train: readonly JsonValue[];
  val: readonly JsonValue[];
  variables: readonly string[];
  beamWidth: number;
  branchFactor: number;
  gradientBatchSize: number;
  valBatchSize: number;
  seed: number;
  runInitialValidation: boolean;
}

/** A short digest of a run's identity. */
export function fingerprint(identity: RunIdentity): string {
  return createHash("sha256").update(JSON.stringify(identity)).digest("hex").slice(0, 16);
}

/**
 * Starts a run, or finds it: the run's seed snapshot (`apo-{run}-seed`) holds the seed templates and the run's
 * fingerprint. Found with the same fingerprint, the run resumes; found with another, it is an error.
 */
export async function openRun(
  store: StoreApi,
  runId: string,
  identity: RunIdentity,
  extra: Record<string, ResourceInit>,
): Promise<{ resumed: boolean; resourcesId: string }> {
  const resourcesId = snapshotId(runId, "seed");
  const digest = fingerprint(identity);
  const found = await findSnapshot(store, resourcesId);
  if (found) {
    const { record } = readSnapshot(found);
    if (record.fingerprint !== digest) {
      throw new AglError(
        "resume_mismatch",
        `APO run "${runId}" is already in the store with other settings (templates, datasets, variables, beam, branch, ` +
          `batch sizes, seed or baseline differ); resume it with the same ones or choose another run id`,
      );
    }
    return { resumed: true, resourcesId };
  }
  const record: JsonObject = {
    run: runId,
    candidate: "seed",
    fingerprint: digest,
    settings: {
      beam_width: identity.beamWidth,
      branch_factor: identity.branchFactor,
      gradient_batch_size: identity.gradientBatchSize,
      val_batch_size: identity.valBatchSize,
      seed: identity.seed,
    },
  };
  await publishSnapshot(store, resourcesId, snapshotResources(identity.templates, extra, record));
  return { resumed: false, resourcesId };
}

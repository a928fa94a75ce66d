import type { Algorithm } from "../algorithm.js";
import type { ApoOptions } from "./apo-options.js";
import type { ApoReport } from "./apo-report.js";
import { runApo } from "./apo.js";

/** Options of {@link createApo}: those of {@link runApo} but the store and datasets, which the trainer supplies. */
export type ApoAlgorithmOptions = Omit<ApoOptions, "store" | "train" | "val">;

/**
 * APO as an {@link Algorithm}, for a `Trainer`: the trainer supplies the store (with runners serving it) and the
 * datasets (`train` writes critiques, `val` scores candidates).
 *
 * @example
 * ```ts
 * const report = await Trainer.dev(new URL("./agent.ts", import.meta.url), { train, val }, {
 *   algorithm: createApo({ templates: { prompt: "Q: {q}" }, optimizer: { baseUrl, apiKey }, rounds: 2 }),
 * });
 * ```
 */
export function createApo(options: ApoAlgorithmOptions): Algorithm<ApoReport> {
  return {
    name: "apo",
    run: (ctx, data) =>
      runApo({
        ...options,
        store: ctx.store,
        train: data.train ?? [],
        val: data.val ?? [],
        logger: options.logger ?? ctx.logger,
        ...((options.signal ?? ctx.signal) ? { signal: options.signal ?? ctx.signal } : {}),
      }),
  };
}

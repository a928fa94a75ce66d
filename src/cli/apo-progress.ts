import type { ApoEvent } from "../algorithm/apo/apo-events.js";

const score = (n: number) => n.toFixed(3);

/** Prints an APO run's events as progress lines (batch progress at most every `everyMs`). */
export function createApoProgress(write: (line: string) => void, everyMs = 5_000): (event: ApoEvent) => void {
  let lastBatchLine = 0;
  return (event) => {
    switch (event.type) {
      case "start": {
        const { shape, budget, roundCost } = event;
        const names = { rollouts: "rollouts", optimizerCalls: "optimizer calls", tokens: "optimizer tokens" } as const;
        const limits =
          (Object.keys(names) as (keyof typeof names)[])
            .filter((k) => budget[k] !== undefined)
            .map((k) => `${budget[k]} ${names[k]}`)
            .join(", ") || "none";
        write(
          `apo run ${event.runId} (${event.resumed ? "resumed from the store" : "new"}): templates ${event.templates.join(", ")}; ` +
            `train ${event.train}, val ${event.val}; beam ${shape.beamWidth} × branch ${shape.branchFactor}, ${event.rounds} rounds, ` +
            `batch ${shape.gradientBatch}, val batch ${shape.valBatch}`,
        );
        write(`  a round costs at most ${roundCost.optimizerCalls} optimizer calls and ${roundCost.rollouts} rollouts; budget: ${limits}`);
        break;
      }
      case "warning":
        write(`warning: ${event.message}`);
        break;
      case "batch": {
        const now = Date.now();
        if (event.finished < event.total && now - lastBatchLine >= everyMs) {
          lastBatchLine = now;
          write(`  … ${event.finished}/${event.total} rollouts of ${event.key}`);
        }
        break;
      }
      case "baseline":
        write(`baseline: seed scores ${score(event.score)} on ${event.rollouts} validation tasks`);
        break;
      case "round_start":
        write(`round ${event.round}: parents ${event.parents.join(", ")}`);
        break;
      case "child":
        write(
          `  ${event.key} ← ${event.parent} (${event.target})${event.replayed ? " [from the store]" : ""}: ` +
            `${event.rejected ? `dropped, ${event.rejected}` : "edited"}`,
        );
        break;
      case "scored":
        write(`  validation batch: ${event.scores.map((s) => `${s.key} ${score(s.score)}`).join(", ")}`);
        break;
      case "new_best":
        write(
          `  new best ${event.key}: ${score(event.score)} on the full validation set, published as ${event.resourcesId} v${event.version}`,
        );
        break;
      case "round_end": {
        const r = event.report;
        write(
          `round ${r.round} done: leader ${r.leader} ${score(r.leaderScore)}, best ${r.best.key} ${score(r.best.score)}; ` +
            `used ${r.used.rollouts} rollouts, ${r.used.optimizerCalls} optimizer calls, ${r.used.tokens} tokens`,
        );
        break;
      }
      case "stopped":
        write(`stopped: ${event.reason}`);
        break;
      case "done":
        break;
    }
  };
}

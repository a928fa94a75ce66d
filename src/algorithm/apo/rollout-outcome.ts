import type { JsonValue } from "@bufbuild/protobuf";
import type { ChatMessage } from "../../adapter/chat-messages.js";

/** How a rollout of an evaluation batch ended, as APO sees it. */
export type OutcomeStatus = "succeeded" | "failed" | "cancelled" | "unfinished";

/** One rollout's result: what the critique reads and what scores a candidate. */
export interface RolloutOutcome {
  rolloutId: string;
  /** Index of the task in its dataset. */
  taskIndex: number;
  input: JsonValue;
  status: OutcomeStatus;
  /** The final reward; undefined when the rollout recorded none (it scores 0). */
  reward: number | undefined;
  /** Text feedback of the rollout's reward spans (`emitReward(…, { feedback })`). */
  feedback: string[];
  /** The rollout's LLM calls as chat messages (read for training batches only). */
  conversations: ChatMessage[][];
  /** Why the rollout failed, when the runner recorded it. */
  error?: string;
}

/** A candidate's score on a batch: the mean final reward, a missing reward counting as 0. */
export function meanReward(outcomes: readonly RolloutOutcome[]): number {
  if (outcomes.length === 0) return 0;
  return outcomes.reduce((sum, o) => sum + (o.reward ?? 0), 0) / outcomes.length;
}

/** Limits of the runs shown to the critique. */
export interface ExperimentsFormat {
  /** Characters kept of each message. Default 1,500. */
  maxMessageChars?: number;
  /** Characters of the whole section; the best-scored runs are cut first. Default 24,000. */
  maxTotalChars?: number;
}

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max)} …[${text.length - max} more characters]`);
const contentText = (content: unknown) => (typeof content === "string" ? content : content == null ? "" : JSON.stringify(content));

/**
 * The runs of a training batch as text for the critique: worst reward first, each with its task, status, reward,
 * grader feedback and conversation (the messages of every LLM call, the last call's in full).
 */
export function formatExperiments(outcomes: readonly RolloutOutcome[], format: ExperimentsFormat = {}): string {
  const maxMessage = format.maxMessageChars ?? 1_500;
  const maxTotal = format.maxTotalChars ?? 24_000;
  const ordered = [...outcomes].sort((a, b) => (a.reward ?? 0) - (b.reward ?? 0) || a.taskIndex - b.taskIndex);
  const parts: string[] = [];
  let total = 0;
  ordered.forEach((o, i) => {
    const lines = [`## Run ${i + 1}: reward ${o.reward === undefined ? "none (counts as 0)" : o.reward.toFixed(3)}, ${o.status}`];
    lines.push(`Task: ${clip(JSON.stringify(o.input), maxMessage)}`);
    if (o.error) lines.push(`Error: ${clip(o.error, maxMessage)}`);
    for (const text of o.feedback) lines.push(`Grader feedback: ${clip(text, maxMessage)}`);
    const seen = new Set<string>();
    for (const messages of o.conversations) {
      for (const m of messages) {
        const calls = m.tool_calls ? ` (tool calls: ${clip(JSON.stringify(m.tool_calls), maxMessage)})` : "";
        const text = `[${m.role}] ${clip(contentText(m.content), maxMessage)}${calls}`;
        // Multi-turn calls repeat the earlier turns; show each message once.
        if (seen.has(text)) continue;
        seen.add(text);
        lines.push(text);
      }
    }
    if (o.conversations.length === 0) lines.push("(no LLM call was recorded for this run)");
    const block = lines.join("\n");
    if (total + block.length > maxTotal && parts.length > 0) return;
    parts.push(block);
    total += block.length;
  });
  if (parts.length < ordered.length) parts.push(`(${ordered.length - parts.length} better-scored runs left out for length)`);
  return parts.join("\n\n");
}

import type { RolloutScope, TimelineQuery } from "../../backend.js";
import { Params, type SqlDialect, type SqlFilters } from "./sql-filters.js";

/**
 * The aggregate queries of the SQL backends, for both dialects: GROUP BY in the database, so the store never decodes
 * the rows it counts. Rewards and token counts come from the columns `spans.reward`, `spans.llm_prompt_tokens`,
 * `spans.llm_response_tokens` and `spans.llm_call_key` (see span-facts.ts), read through partial indexes on the spans
 * that have them.
 */

/** A statement's text and parameters. */
export interface SqlStatement {
  text: string;
  values: unknown[];
}

/** Column names of the rows the aggregate statements return. */
export interface SqlAggregates {
  /** Rows: bucket, mode, status, n; by start_time (created) or end_time (finished). */
  timeline(query: TimelineQuery, column: "start_time" | "end_time"): SqlStatement;
  /**
   * Rows: resources_id, resources_version, mode, rollouts, rewarded, reward_sum, reward_squares, reward_min,
   * reward_max, first_start, last_start.
   */
  rewards(scope: RolloutScope): SqlStatement;
  /** Rows: resources_id, resources_version, mode, calls, prompt_tokens, response_tokens. */
  tokens(scope: RolloutScope): SqlStatement;
  /** Rows: rollout_id, reward (NULL when it has none). */
  finalRewards(rolloutIds: readonly string[]): SqlStatement;
}

export function sqlAggregates(dialect: SqlDialect, filters: SqlFilters, table: (name: string) => string): SqlAggregates {
  const n = dialect.number;
  const where = (condition: string) => (condition ? ` WHERE ${condition}` : "");
  /** The final reward of rollout `r`: its latest attempt's reward span with the highest sequence id. */
  const finalReward =
    `(SELECT s.reward FROM ${table("spans")} s WHERE s.rollout_id = r.rollout_id AND s.reward IS NOT NULL ` +
    `AND s.attempt_id = (SELECT a.attempt_id FROM ${table("attempts")} a WHERE a.rollout_id = r.rollout_id ` +
    "ORDER BY a.sequence_id DESC, a.seq DESC LIMIT 1) ORDER BY s.sequence_id DESC LIMIT 1)";
  return {
    timeline(query, column) {
      const p = new Params(dialect);
      const bucket = dialect.truncate(
        `(${column} - CAST(${p.add(query.start)} AS DOUBLE PRECISION)) / CAST(${p.add(query.bucketSeconds)} AS DOUBLE PRECISION)`,
      );
      const window = `${column} >= ${p.add(query.start)} AND ${column} < ${p.add(query.end)}`;
      const scope = filters.scopeWhere(query.scope)(p);
      const text =
        `SELECT ${bucket} AS bucket, mode, status, ${n("count(*)")} AS n FROM ${table("rollouts")} ` +
        `WHERE ${window}${scope ? ` AND (${scope})` : ""} GROUP BY 1, 2, 3`;
      return { text, values: p.values };
    },
    rewards(scope) {
      const p = new Params(dialect);
      const condition = filters.scopeWhere(scope)(p);
      // MATERIALIZED: inlined, the final-reward subquery would run once per aggregate that reads it.
      const text =
        `WITH f AS MATERIALIZED (SELECT r.resources_id, r.resources_version, r.mode, r.start_time, ${finalReward} AS reward ` +
        `FROM ${table("rollouts")} r${where(condition)}) ` +
        `SELECT resources_id, resources_version, mode, ${n("count(*)")} AS rollouts, ${n("count(reward)")} AS rewarded, ` +
        `${n("coalesce(sum(reward), 0)")} AS reward_sum, ${n("coalesce(sum(reward * reward), 0)")} AS reward_squares, ` +
        "min(reward) AS reward_min, max(reward) AS reward_max, min(start_time) AS first_start, max(start_time) AS last_start " +
        "FROM f GROUP BY resources_id, resources_version, mode";
      return { text, values: p.values };
    },
    tokens(scope) {
      const p = new Params(dialect);
      const condition = filters.scopeWhere(scope)(p);
      // One row a call: the spans of a rollout with the same call key record one call. Grouped after the join, so that
      // a narrow scope groups only its own spans (docs/benchmarks.md, the twentieth sitting).
      const text =
        `SELECT resources_id, resources_version, mode, ${n("count(*)")} AS calls, ` +
        `${n("sum(prompt)")} AS prompt_tokens, ${n("sum(response)")} AS response_tokens FROM (` +
        "SELECT r.resources_id, r.resources_version, r.mode, max(s.llm_prompt_tokens) AS prompt, " +
        "max(s.llm_response_tokens) AS response " +
        `FROM (SELECT rollout_id, resources_id, resources_version, mode FROM ${table("rollouts")}${where(condition)}) r ` +
        `JOIN ${table("spans")} s ON s.rollout_id = r.rollout_id AND s.llm_response_tokens IS NOT NULL ` +
        "GROUP BY r.rollout_id, r.resources_id, r.resources_version, r.mode, s.llm_call_key) calls " +
        "GROUP BY resources_id, resources_version, mode";
      return { text, values: p.values };
    },
    finalRewards(rolloutIds) {
      const p = new Params(dialect);
      const ids = dialect.inList("r.rollout_id", rolloutIds, p);
      return { text: `SELECT r.rollout_id, ${finalReward} AS reward FROM ${table("rollouts")} r WHERE ${ids}`, values: p.values };
    },
  };
}

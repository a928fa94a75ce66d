import { useMemo, useState } from "react";
import { RolloutMode } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { LabeledSelect } from "../components/labeled-select.js";
import { useLiveResources } from "../components/live-resources.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { navigate } from "../components/use-route.js";
import { truncate } from "../lib/format.js";
import { type ApoRun, type ApoScores, apoScores, candidateTree, readApoRuns } from "../lib/apo-runs.js";
import { sideBySide } from "../lib/text-diff.js";
import { SideBySide } from "./diff-view.js";

const POLL_MS = 5000;
/** Validation rollouts of one run read at most (a run of 10 rounds, a beam of 4 and 4 branches on 50 tasks is ~8,000). */
const MAX_EVALUATIONS = 50_000;

const NO_SCORES: ApoScores = { full: new Map(), rounds: [] };

/** APO runs, read from the snapshots APO publishes (`apo-{run}-…` with its `_apo` record) and their val scores. */
export function ApoView({ runId }: { runId: string | undefined }) {
  const { clients } = useStore();
  const { latest } = useLiveResources();
  const snapshots = usePoll(
    (signal) => clients.resources.queryResources({ resourcesIdContains: "apo-", page: { limit: 5000 } }, { signal }),
    undefined,
    [clients, latest?.resourcesId, latest?.version],
  );
  const runs = useMemo(() => readApoRuns(snapshots.data?.resources ?? []), [snapshots.data]);
  const run = runs.find((r) => r.run === runId) ?? runs.at(-1);
  const candidateIds = useMemo(() => run?.candidates.map((c) => c.resourcesId) ?? [], [run]);
  // The run's validation rollouts (its candidates' snapshots only), scored per batch as APO scores them.
  const scores = usePoll(
    async (signal) => {
      if (run === undefined || candidateIds.length === 0) return undefined;
      const { rollouts, finalRewards } = await clients.store.queryRollouts(
        { resourcesIdIn: candidateIds, modeIn: [RolloutMode.VAL], includeFinalRewards: true, page: { limit: MAX_EVALUATIONS } },
        { signal },
      );
      return apoScores(run.run, rollouts, finalRewards);
    },
    POLL_MS,
    [clients, run?.run, candidateIds.join("\n")],
  );

  return (
    <section data-testid="view-apo">
      <h2>APO runs</h2>
      <ErrorBanner error={snapshots.error ?? scores.error} />
      {snapshots.data === undefined && !snapshots.error ? <Loading /> : null}
      {snapshots.data !== undefined && runs.length === 0 ? (
        <p className="muted">No APO run has published candidates in this store.</p>
      ) : null}
      {run === undefined ? null : (
        <>
          <div className="filters">
            <LabeledSelect
              label="Run"
              testId="apo-run-select"
              value={run.run}
              options={runs.map((r) => r.run)}
              onChange={(id) => navigate({ view: "apo", runId: id }, true)}
            />
            <span className="muted">
              {run.candidates.length} candidates · best{" "}
              {run.best ? `${run.best.candidate} (${score3(run.best.score)}, round ${run.best.round})` : "—"}
            </span>
          </div>
          <RunDetail run={run} scores={scores.data ?? NO_SCORES} />
        </>
      )}
    </section>
  );
}

function RunDetail({ run, scores }: { run: ApoRun; scores: ApoScores }) {
  const [selected, setSelected] = useState<string | undefined>(undefined);
  // A candidate's score in the tree: on the whole validation set when measured, else its latest round's batch.
  const treeScores = useMemo(() => {
    const out = new Map<string, number>();
    for (const r of scores.rounds) out.set(r.key, r.score);
    for (const [key, score] of scores.full) out.set(key, score);
    return out;
  }, [scores]);
  const tree = useMemo<ChartOption>(
    () => ({
      tooltip: { renderMode: "richText", trigger: "item" },
      series: [
        {
          type: "tree",
          data: [candidateTree(run, treeScores)],
          top: 16,
          bottom: 16,
          left: 110,
          right: 130,
          symbolSize: 10,
          initialTreeDepth: -1,
          expandAndCollapse: false,
          label: {
            position: "left",
            verticalAlign: "middle",
            align: "right",
            formatter: (p: { name: string; value?: number }) => labelOf(p),
          },
          leaves: { label: { position: "right", align: "left" } },
        },
      ],
    }),
    [run, treeScores],
  );
  const rounds = useMemo<ChartOption>(() => {
    const roundOf = new Map(run.candidates.map((c) => [c.key, c.round]));
    // Best so far: the highest whole-validation score among candidates created up to each round.
    const best: [number, number][] = [];
    let top = Number.NEGATIVE_INFINITY;
    for (const round of [...new Set(run.candidates.map((c) => c.round))].sort((a, b) => a - b)) {
      for (const [key, score] of scores.full) if (roundOf.get(key) === round) top = Math.max(top, score);
      if (Number.isFinite(top)) best.push([round, top]);
    }
    return {
      legend: {},
      tooltip: { renderMode: "richText", trigger: "item" },
      grid: { left: 48, right: 16, top: 48, bottom: 32 },
      xAxis: { type: "value", name: "round", minInterval: 1 },
      yAxis: { type: "value", name: "val reward", scale: true },
      series: [
        { name: "round batch", type: "scatter", data: scores.rounds.map((r) => ({ name: r.key, value: [r.round, r.score] })) },
        { name: "best (full validation)", type: "line", step: "end", data: best },
      ],
    };
  }, [run, scores]);
  const candidate = run.candidates.find((c) => c.key === selected);
  const bestTemplates = run.best?.templates ?? {};
  const seedTemplates = run.seed?.templates ?? {};
  const names = [...new Set([...Object.keys(seedTemplates), ...Object.keys(bestTemplates)])].sort();

  return (
    <>
      <div className="grid2">
        <div className="panel">
          <h3>Candidate tree</h3>
          <Chart testId="apo-tree" option={tree} points={run.candidates.length} height={Math.max(260, 28 * run.candidates.length)} />
        </div>
        <div className="panel">
          <h3>Scores per round</h3>
          <Chart testId="apo-scores-chart" option={rounds} points={scores.rounds.length} />
        </div>
      </div>
      <div className="panel">
        <h3>Candidates</h3>
        <table className="table" data-testid="apo-candidates">
          <thead>
            <tr>
              <th>Candidate</th>
              <th>Round</th>
              <th>Parent</th>
              <th>Edited</th>
              <th>Full val score</th>
              <th>Round batch scores</th>
              <th>Critique</th>
            </tr>
          </thead>
          <tbody>
            {run.candidates.map((c) => (
              <tr
                key={c.key}
                data-testid="apo-candidate"
                data-candidate={c.key}
                data-parent={c.parent ?? ""}
                data-round={c.round}
                className={c.key === selected ? "selected" : undefined}
              >
                <td>
                  <button type="button" className="link" onClick={() => setSelected(c.key)}>
                    {c.key}
                  </button>
                </td>
                <td>{c.round}</td>
                <td>{c.parent ?? "—"}</td>
                <td>{c.rejected ? `rejected: ${c.rejected}` : (c.target ?? "—")}</td>
                <td>{score3(scores.full.get(c.key))}</td>
                <td className="muted">
                  {scores.rounds
                    .filter((r) => r.key === c.key)
                    .map((r) => `r${r.round} ${score3(r.score)}`)
                    .join(" · ")}
                </td>
                <td className="muted">{truncate(c.critique ?? "", 120)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {candidate === undefined ? null : (
          <div className="panel" data-testid="apo-critique">
            <h4>{candidate.key}: critique</h4>
            <pre className="msg-text">{candidate.critique ?? "(none: the seed)"}</pre>
            {Object.entries(candidate.templates).map(([name, text]) => (
              <div key={name}>
                <h4>{name}</h4>
                <pre className="msg-text">{text}</pre>
              </div>
            ))}
          </div>
        )}
      </div>
      <div className="panel" data-testid="apo-best-diff">
        <h3>Best ({run.best?.candidate ?? "—"}) against the seed</h3>
        {names.map((name) => (
          <div key={name}>
            <h4>{name}</h4>
            <SideBySide name={name} rows={sideBySide(seedTemplates[name] ?? "", bestTemplates[name] ?? "")} />
          </div>
        ))}
      </div>
    </>
  );
}

/** Scores at a fixed three decimals, as APO reports them. */
const score3 = (value: number | undefined) => (value === undefined ? "—" : value.toFixed(3));

function labelOf(p: { name: string; value?: number }): string {
  return typeof p.value === "number" ? `${p.name} (${p.value.toFixed(2)})` : p.name;
}

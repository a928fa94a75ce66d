import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useMemo, useRef, useState } from "react";
import type { LlmConversation } from "../../../src/gen/agl/v1/triplets_pb.js";
import { type Attempt, RolloutStatus, type Span } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { StatusBadge, statusColor } from "../components/status-badge.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { chatView } from "../lib/chat.js";
import { formatDuration, formatJson, formatLogprob, formatReward, formatSpan, formatTime } from "../lib/format.js";
import { attemptStatusName, rolloutModeName, rolloutStatusName } from "../lib/names.js";
import { attributeRows, type CallTokens, callTokens, rewardRows } from "../lib/span-view.js";
import { alignTokens, confidenceClass } from "../lib/token-alignment.js";
import { formatRoute, resourcesVersionRoute } from "../lib/url-state.js";
import { layoutWaterfall } from "../lib/waterfall.js";

const POLL_MS = 3000;
const TERMINAL = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);
const MAX_SPANS = 10_000;
const SPAN_ROW_HEIGHT = 22;
/** Up to this many LLM calls all start open; beyond, only the first (a closed call renders nothing but its summary). */
const OPEN_CALLS = 10;

/** One rollout: its attempts, span waterfall, LLM calls with tokens, rewards and triplets. Live until it finishes. */
export function RolloutView({ rolloutId, attemptId }: { rolloutId: string; attemptId?: string | undefined }) {
  const { clients } = useStore();
  const [finished, setFinished] = useState(false);
  const { data, error } = usePoll(
    async (signal) => {
      const options = { signal };
      const attempt = attemptId ?? "latest";
      const [rollout, attempts, spans, messages, triplets] = await Promise.all([
        clients.store.getRollout({ rolloutId }, options),
        clients.store.queryAttempts({ rolloutId, page: { sortBy: "sequence_id" } }, options),
        clients.store.querySpans({ rolloutId, attemptId: attempt, page: { sortBy: "sequence_id", limit: MAX_SPANS } }, options),
        clients.triplets.getRolloutMessages({ rolloutIds: [rolloutId] }, options),
        clients.triplets.getRolloutTriplets({ rolloutId, attemptId: attemptId ?? "" }, options),
      ]);
      setFinished(TERMINAL.has(rollout.status));
      return {
        rollout,
        attempts: attempts.attempts,
        spans: spans.spans,
        spanTotal: spans.page?.total ?? 0,
        messages: messages.rollouts[0],
        triplets,
        now: Date.now() / 1000,
      };
    },
    finished ? undefined : POLL_MS,
    [clients, rolloutId, attemptId],
  );

  if (data === undefined) {
    return (
      <section data-testid="view-rollout">
        <h2>Rollout {rolloutId}</h2>
        <ErrorBanner error={error} />
        {error ? null : <Loading />}
      </section>
    );
  }
  const { rollout } = data;
  const input = rollout.input ? toJson(ValueSchema, rollout.input) : undefined;
  // The messages view reads the latest attempt; shown only when that is the attempt on screen.
  const showingLatest = attemptId === undefined || attemptId === rollout.latestAttempt?.attemptId;
  return (
    <section data-testid="view-rollout">
      <h2>
        Rollout <span data-testid="rollout-id">{rollout.rolloutId}</span>
      </h2>
      <ErrorBanner error={error} />
      <dl className="facts">
        <dt>Status</dt>
        <dd data-testid="rollout-status">
          <StatusBadge status={rolloutStatusName(rollout.status)} />
        </dd>
        <dt>Mode</dt>
        <dd data-testid="rollout-mode">{rolloutModeName(rollout.mode)}</dd>
        <dt>Resources</dt>
        <dd data-testid="rollout-resources">
          {rollout.resourcesId === "" ? (
            "—"
          ) : (
            <a
              href={formatRoute(resourcesVersionRoute(rollout.resourcesId, rollout.resourcesVersion))}
            >{`${rollout.resourcesId}@${rollout.resourcesVersion}`}</a>
          )}
        </dd>
        <dt>Group</dt>
        <dd data-testid="rollout-group">{rollout.groupId || "—"}</dd>
        <dt>Final reward</dt>
        <dd data-testid="rollout-final-reward">{formatReward(data.triplets.finalReward)}</dd>
        <dt>Started</dt>
        <dd>{formatTime(rollout.startTime)}</dd>
        <dt>Duration</dt>
        <dd>{formatSpan(rollout.startTime, rollout.endTime, data.now)}</dd>
      </dl>
      <details className="panel" open>
        <summary>Input</summary>
        <pre className="json" data-testid="rollout-input">
          {formatJson(input)}
        </pre>
      </details>
      <Attempts
        attempts={data.attempts}
        now={data.now}
        rolloutId={rollout.rolloutId}
        selected={attemptId ?? rollout.latestAttempt?.attemptId}
      />
      <Waterfall spans={data.spans} total={data.spanTotal} />
      {showingLatest ? <LlmCalls conversations={data.messages?.conversations ?? []} spans={data.spans} /> : null}
      <Rewards spans={data.spans} />
      <div className="panel" data-testid="rollout-triplets">
        <h3>Triplets ({data.triplets.triplets.length})</h3>
        <table className="table">
          <thead>
            <tr>
              <th>Turn</th>
              <th>Calls</th>
              <th>Prompt tokens</th>
              <th>Response tokens</th>
              <th>Masked</th>
              <th>Reward</th>
              <th>Resources</th>
            </tr>
          </thead>
          <tbody>
            {data.triplets.triplets.map((t) => (
              <tr key={`${t.turnIndex}-${t.spanIds.join(",")}`} data-testid="triplet-row">
                <td>{t.turnIndex}</td>
                <td>{t.turnCount}</td>
                <td>{t.promptTokenIds.length}</td>
                <td>{t.responseTokenIds.length}</td>
                <td>{t.responseMask.filter((m) => m === 0).length}</td>
                <td>{formatReward(t.reward)}</td>
                <td>{t.resourcesId ? `${t.resourcesId}@${t.resourcesVersion}` : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Attempts({
  attempts,
  now,
  rolloutId,
  selected,
}: {
  attempts: Attempt[];
  now: number;
  rolloutId: string;
  selected: string | undefined;
}) {
  const option = useMemo<ChartOption>(
    () => ({
      tooltip: { renderMode: "richText", trigger: "item" },
      grid: { left: 64, right: 16, top: 8, bottom: 28 },
      xAxis: { type: "time" },
      yAxis: { type: "category", data: attempts.map((a) => `#${a.sequenceId}`), inverse: true },
      series: [
        {
          type: "custom",
          encode: { x: [1, 2], y: 0 },
          renderItem: (_params: unknown, api: CustomApi) => {
            const from = api.coord([api.value(1), api.value(0)]);
            const to = api.coord([api.value(2), api.value(0)]);
            const height = api.size([0, 1])[1] * 0.6;
            return {
              type: "rect",
              shape: { x: from[0], y: from[1] - height / 2, width: Math.max(3, to[0] - from[0]), height },
              style: api.style(),
            };
          },
          data: attempts.map((a, i) => ({
            name: `#${a.sequenceId} ${attemptStatusName(a.status)}`,
            value: [i, a.startTime * 1000, (a.endTime ?? now) * 1000],
            itemStyle: { color: statusColor(attemptStatusName(a.status)) },
          })),
        },
      ],
    }),
    [attempts, now],
  );
  return (
    <div className="panel">
      <h3>Attempts ({attempts.length})</h3>
      <Chart testId="attempts-timeline" option={option} points={attempts.length} height={Math.max(80, 40 + attempts.length * 28)} />
      <table className="table">
        <tbody>
          {attempts.map((a) => (
            <tr
              key={a.attemptId}
              data-testid="attempt-row"
              data-attempt-id={a.attemptId}
              className={a.attemptId === selected ? "selected" : undefined}
            >
              <td>
                <a href={`#/rollouts/${encodeURIComponent(rolloutId)}?attempt=${encodeURIComponent(a.attemptId)}`}>#{a.sequenceId}</a>
              </td>
              <td data-testid="attempt-status">
                <StatusBadge status={attemptStatusName(a.status)} />
              </td>
              <td>{a.workerId || "—"}</td>
              <td>{formatTime(a.startTime)}</td>
              <td>{formatSpan(a.startTime, a.endTime, now)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The parts of ECharts' custom-series API the attempt bars use. */
interface CustomApi {
  value(dim: number): number;
  coord(point: number[]): [number, number];
  size(delta: number[]): [number, number];
  style(): object;
}

function Waterfall({ spans, total }: { spans: Span[]; total: number }) {
  const layout = useMemo(() => layoutWaterfall(spans), [spans]);
  const [selected, setSelected] = useState<string | undefined>(undefined);
  // Virtualized: a rollout may have thousands of spans.
  const scrollRef = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: layout.rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => SPAN_ROW_HEIGHT,
    overscan: 20,
  });
  const span = spans.find((s) => s.spanId === selected);
  return (
    <div className="panel">
      <h3>
        Spans ({spans.length}
        {total > spans.length ? ` of ${total}` : ""}) · {formatDuration(layout.end - layout.start)}
      </h3>
      <div ref={scrollRef} className="waterfall" data-testid="span-waterfall">
        <div className="wf-body" style={{ height: virtualizer.getTotalSize() }}>
          {virtualizer.getVirtualItems().map((item) => {
            const row = layout.rows[item.index];
            if (row === undefined) return null;
            return (
              <button
                type="button"
                key={row.span.spanId}
                className={`wf-row${row.span.spanId === selected ? " selected" : ""}${row.span.status?.code === 2 ? " error" : ""}`}
                data-testid="span-row"
                data-span-id={row.span.spanId}
                data-depth={row.depth}
                onClick={() => setSelected(row.span.spanId)}
                style={{ height: SPAN_ROW_HEIGHT, transform: `translateY(${item.start}px)` }}
              >
                <span className="wf-name" style={{ paddingLeft: `${row.depth * 14}px` }} title={row.span.name}>
                  {row.orphan ? "↳ " : ""}
                  {row.span.name}
                </span>
                <span className="wf-track">
                  <span
                    className="wf-bar"
                    data-testid="span-bar"
                    style={{ left: `${row.offset * 100}%`, width: `max(2px, ${row.width * 100}%)` }}
                  />
                </span>
                <span className="wf-dur">{formatDuration(row.duration)}</span>
              </button>
            );
          })}
        </div>
      </div>
      {span === undefined ? (
        <p className="muted">Select a span to see its attributes.</p>
      ) : (
        <table className="table attrs" data-testid="span-attributes">
          <caption>
            {span.name} · {span.spanId} · seq {span.sequenceId}
          </caption>
          <tbody>
            {attributeRows(span).map((a) => (
              <tr key={a.key} data-testid="span-attribute" data-key={a.key}>
                <th>{a.key}</th>
                <td>
                  <pre>{a.value}</pre>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function LlmCalls({ conversations, spans }: { conversations: LlmConversation[]; spans: Span[] }) {
  const bySpan = useMemo(() => new Map(spans.map((s) => [s.spanId, s])), [spans]);
  return (
    <div className="panel" data-testid="llm-calls">
      <h3>LLM calls ({conversations.length})</h3>
      {conversations.map((c, i) => (
        <LlmCall
          key={c.spanId || i}
          conversation={c}
          span={bySpan.get(c.spanId)}
          index={i}
          initiallyOpen={conversations.length <= OPEN_CALLS || i === 0}
        />
      ))}
    </div>
  );
}

function LlmCall(props: { conversation: LlmConversation; span: Span | undefined; index: number; initiallyOpen: boolean }) {
  const { conversation, span, index, initiallyOpen } = props;
  const [open, setOpen] = useState(initiallyOpen);
  const tokens = useMemo(() => (span ? callTokens(span) : undefined), [span]);
  return (
    <details
      className="llm-call"
      data-testid="llm-call"
      data-span-id={conversation.spanId}
      open={open}
      onToggle={(e) => setOpen(e.currentTarget.open)}
    >
      <summary>
        Call {index + 1} · {conversation.model || "model?"}
        {tokens ? ` · ${tokens.promptTokenCount ?? "?"} prompt + ${tokens.responseIds.length} response tokens` : ""}
        {conversation.reward === undefined ? "" : ` · reward ${formatReward(conversation.reward)}`}
      </summary>
      {open ? <LlmCallBody conversation={conversation} tokens={tokens} /> : null}
    </details>
  );
}

function LlmCallBody({ conversation, tokens }: { conversation: LlmConversation; tokens: CallTokens | undefined }) {
  const messages = conversation.messages.map(chatView);
  const answer = messages.at(-1)?.role === "assistant" ? messages.at(-1) : undefined;
  const alignment = tokens
    ? alignTokens({ ids: tokens.responseIds, logprobs: tokens.logprobs, tokenTexts: tokens.tokenTexts, text: answer?.text })
    : undefined;
  return (
    <>
      {messages.map((m, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: messages are a fixed list, in order
        <div key={i} className={`msg msg-${m.role}`} data-testid="chat-message" data-role={m.role}>
          <div className="msg-role">
            {m.role}
            {m.toolCallId ? ` (answers ${m.toolCallId})` : ""}
          </div>
          {m.text === "" ? null : <pre className="msg-text">{m.text}</pre>}
          {m.otherParts.length > 0 ? <div className="muted">[{m.otherParts.join(", ")}]</div> : null}
          {m.toolCalls.map((t) => (
            <div key={t.id || t.name} className="tool-call" data-testid="tool-call">
              <span className="tool-name">{t.name}</span>(<code>{t.arguments}</code>)
            </div>
          ))}
        </div>
      ))}
      {alignment === undefined ? null : (
        <div className="tokens">
          <div className="msg-role">Response tokens (colour: probability of the sampled token)</div>
          {alignment.problems.length > 0 ? (
            <div className="warn" data-testid="token-mismatch">
              {alignment.problems.join("; ")}
            </div>
          ) : null}
          <div className="token-view" data-testid="token-view">
            {alignment.segments.map((seg, i) =>
              seg.kind === "token" ? (
                <TokenChip key={`t${seg.token.index}`} id={seg.token.id} logprob={seg.token.logprob} text={seg.text} />
              ) : (
                // biome-ignore lint/suspicious/noArrayIndexKey: segments are a fixed list, in order
                <span key={`s${i}`} className="untok">
                  {seg.text}
                </span>
              ),
            )}
            {alignment.unplaced.map((t) => (
              <TokenChip key={`u${t.index}`} id={t.id} logprob={t.logprob} text={t.text ? t.text : `⟨${t.id}⟩`} />
            ))}
          </div>
        </div>
      )}
    </>
  );
}

function TokenChip({ id, logprob, text }: { id: number; logprob: number | undefined; text: string }) {
  const level = confidenceClass(logprob);
  return (
    <span
      className={`tok${level === undefined ? "" : ` p${level}`}`}
      data-testid="token"
      data-token-id={id}
      data-logprob={logprob ?? ""}
      title={`id ${id}${logprob === undefined ? "" : ` · logprob ${formatLogprob(logprob)}`}`}
    >
      {text}
    </span>
  );
}

function Rewards({ spans }: { spans: Span[] }) {
  const rows = useMemo(() => rewardRows(spans), [spans]);
  return (
    <div className="panel" data-testid="rollout-rewards">
      <h3>Rewards ({rows.length})</h3>
      <table className="table">
        <tbody>
          {rows.map((r) => (
            <tr key={r.spanId} data-testid="reward-row">
              <td>{r.name}</td>
              <td>{formatReward(r.value)}</td>
              <td className="muted">
                span {r.spanId} · seq {r.sequenceId}
              </td>
              <td>{r.feedback ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

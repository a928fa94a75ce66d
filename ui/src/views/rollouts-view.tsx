import { createColumnHelper, tableFeatures, useTable } from "@tanstack/react-table";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useMemo, useRef, useState } from "react";
import type { Rollout } from "../../../src/gen/agl/v1/types_pb.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { LabeledSelect } from "../components/labeled-select.js";
import { StatusBadge } from "../components/status-badge.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { navigate } from "../components/use-route.js";
import { formatCount, formatReward, formatSpan, formatTime, fromDatetimeLocal, toDatetimeLocal } from "../lib/format.js";
import { isRolloutModeName, ROLLOUT_MODE_NAMES, ROLLOUT_STATUS_NAMES, rolloutModeName, rolloutStatusName } from "../lib/names.js";
import { pageWindow, toggleSort, toQueryRolloutsRequest, withFilter } from "../lib/rollout-filter.js";
import { DEFAULT_ROLLOUTS_QUERY, PAGE_SIZES, type RolloutSortField, type RolloutsQuery } from "../lib/url-state.js";

const POLL_MS = 5000;
const ROW_HEIGHT = 32;

interface Row {
  rollout: Rollout;
  reward: number | undefined;
  now: number;
}

const features = tableFeatures({});
const helper = createColumnHelper<typeof features, Row>();

/** Column id → [header, the store's sort field if sortable, testid of its cells, width]. */
const COLUMNS: [string, string, RolloutSortField | undefined, string][] = [
  ["id", "Rollout", "rollout_id", "minmax(12rem, 2fr)"],
  ["status", "Status", "status", "7.5rem"],
  ["mode", "Mode", "mode", "5rem"],
  ["start", "Started (UTC)", "start_time", "11.5rem"],
  ["duration", "Duration", "end_time", "6.5rem"],
  ["resources", "Resources", "resources_id", "minmax(8rem, 1fr)"],
  ["group", "Group", "group_id", "minmax(6rem, 1fr)"],
  ["reward", "Reward", undefined, "5.5rem"],
  ["attempts", "Attempts", undefined, "5.5rem"],
];
const GRID_TEMPLATE = COLUMNS.map((c) => c[3]).join(" ");

const columns = helper.columns([
  helper.display({ id: "id", cell: ({ row }) => row.original.rollout.rolloutId }),
  helper.display({ id: "status", cell: ({ row }) => <StatusBadge status={rolloutStatusName(row.original.rollout.status)} /> }),
  helper.display({ id: "mode", cell: ({ row }) => rolloutModeName(row.original.rollout.mode) }),
  helper.display({ id: "start", cell: ({ row }) => formatTime(row.original.rollout.startTime) }),
  helper.display({
    id: "duration",
    cell: ({ row }) => formatSpan(row.original.rollout.startTime, row.original.rollout.endTime, row.original.now),
  }),
  helper.display({
    id: "resources",
    cell: ({ row }) => {
      const r = row.original.rollout;
      return r.resourcesId === "" ? "—" : `${r.resourcesId}@${r.resourcesVersion}`;
    },
  }),
  helper.display({ id: "group", cell: ({ row }) => row.original.rollout.groupId || "—" }),
  helper.display({ id: "reward", cell: ({ row }) => formatReward(row.original.reward) }),
  helper.display({ id: "attempts", cell: ({ row }) => row.original.rollout.latestAttempt?.sequenceId ?? 0 }),
]);

/** Server-side filtered, sorted and paged rollouts; rows virtualized, so a 1,000-row page scrolls smoothly. */
export function RolloutsView({ query }: { query: RolloutsQuery }) {
  const { clients } = useStore();
  const request = useMemo(() => toQueryRolloutsRequest(query), [query]);
  const { data, error, loading } = usePoll(
    async (signal) => {
      const response = await clients.store.queryRollouts(request, { signal });
      return { response, now: Date.now() / 1000 };
    },
    POLL_MS,
    [clients, request],
  );
  const rows = useMemo<Row[]>(
    () =>
      (data?.response.rollouts ?? []).map((rollout) => ({
        rollout,
        reward: data?.response.finalRewards[rollout.rolloutId],
        now: data?.now ?? 0,
      })),
    [data],
  );
  const table = useTable({ features, columns, data: rows, getRowId: (row) => row.rollout.rolloutId });
  const tableRows = table.getRowModel().rows;
  const scrollRef = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: tableRows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 10,
  });
  const total = data?.response.page?.total ?? 0;
  const window = pageWindow(query, total);
  const go = (next: RolloutsQuery, replace = true) => navigate({ view: "rollouts", query: next }, replace);

  return (
    <section data-testid="view-rollouts" className="rollouts">
      <h2>Rollouts</h2>
      <Filters query={query} onChange={(change) => go(withFilter(query, change))} />
      <ErrorBanner error={error} />
      <div className="table-bar">
        <span data-testid="rollouts-total">{formatCount(total)} rollouts</span>
        {loading ? <span className="muted"> · loading…</span> : null}
        <span className="spacer" />
        <LabeledSelect
          label="Page size"
          testId="rollouts-page-size"
          value={query.size}
          options={PAGE_SIZES}
          onChange={(size) => go({ ...query, size: Number(size), page: 0 })}
        />
        <button
          type="button"
          data-testid="rollouts-page-prev"
          disabled={query.page === 0}
          onClick={() => go({ ...query, page: query.page - 1 }, false)}
        >
          ‹ Prev
        </button>
        <span data-testid="rollouts-page-info">
          {formatCount(window.from)}–{formatCount(window.to)} of {formatCount(window.total)}
        </span>
        <button
          type="button"
          data-testid="rollouts-page-next"
          disabled={query.page + 1 >= window.pages}
          onClick={() => go({ ...query, page: query.page + 1 }, false)}
        >
          Next ›
        </button>
      </div>
      <div ref={scrollRef} className="vtable" data-testid="rollouts-table">
        <table>
          <thead>
            <tr className="vrow vhead" style={{ gridTemplateColumns: GRID_TEMPLATE }}>
              {COLUMNS.map(([id, header, sort]) => (
                <th key={id} aria-sort={sort === query.sort ? (query.order === "asc" ? "ascending" : "descending") : undefined}>
                  {sort === undefined ? (
                    header
                  ) : (
                    <button
                      type="button"
                      className="sort"
                      data-testid={`rollouts-sort-${sort}`}
                      onClick={() => go(toggleSort(query, sort))}
                    >
                      {header}
                      {sort === query.sort ? (query.order === "asc" ? " ▲" : " ▼") : ""}
                    </button>
                  )}
                </th>
              ))}
            </tr>
          </thead>
          <tbody style={{ height: virtualizer.getTotalSize() }}>
            {virtualizer.getVirtualItems().map((item) => {
              const row = tableRows[item.index];
              if (row === undefined) return null;
              const id = row.original.rollout.rolloutId;
              return (
                <tr
                  key={row.id}
                  className="vrow"
                  data-testid="rollout-row"
                  data-rollout-id={id}
                  style={{ gridTemplateColumns: GRID_TEMPLATE, height: ROW_HEIGHT, transform: `translateY(${item.start}px)` }}
                >
                  {row.getAllCells().map((cell) => (
                    <td key={cell.id} data-testid={`cell-${cell.column.id}`}>
                      {cell.column.id === "id" ? (
                        // The link covers the whole row (CSS), so a click anywhere on it opens the rollout.
                        <a className="row-link" data-testid="rollout-link" href={`#/rollouts/${encodeURIComponent(id)}`}>
                          {id}
                        </a>
                      ) : (
                        <table.FlexRender cell={cell} />
                      )}
                    </td>
                  ))}
                </tr>
              );
            })}
          </tbody>
        </table>
        {data !== undefined && tableRows.length === 0 ? <div className="muted empty">No rollouts match.</div> : null}
        {data === undefined && !error ? <Loading /> : null}
      </div>
    </section>
  );
}

type FilterChange = Partial<Omit<RolloutsQuery, "page">>;

function Filters({ query, onChange }: { query: RolloutsQuery; onChange: (change: FilterChange) => void }) {
  return (
    <div className="filters" data-testid="rollouts-filters">
      <fieldset className="statuses">
        <legend>Status</legend>
        {ROLLOUT_STATUS_NAMES.map((s) => (
          <label key={s}>
            <input
              type="checkbox"
              data-testid={`filter-status-${s}`}
              checked={query.statuses.includes(s)}
              onChange={(e) => onChange({ statuses: e.target.checked ? [...query.statuses, s] : query.statuses.filter((x) => x !== s) })}
            />
            {s}
          </label>
        ))}
      </fieldset>
      <LabeledSelect
        label="Mode"
        testId="filter-mode"
        value={query.mode ?? ""}
        options={ROLLOUT_MODE_NAMES}
        empty="any"
        onChange={(mode) => onChange({ mode: isRolloutModeName(mode) ? mode : undefined })}
      />
      <TextFilter label="Resources id" testId="filter-resources" value={query.resourcesId} onChange={(v) => onChange({ resourcesId: v })} />
      <TextFilter
        label="Version"
        testId="filter-version"
        type="number"
        value={query.resourcesVersion?.toString()}
        onChange={(v) => onChange({ resourcesVersion: v === undefined || !(Number(v) > 0) ? undefined : Math.floor(Number(v)) })}
      />
      <TextFilter label="Group" testId="filter-group" value={query.groupId} onChange={(v) => onChange({ groupId: v })} />
      <TextFilter label="Id contains" testId="filter-id" value={query.idContains} onChange={(v) => onChange({ idContains: v })} />
      <label>
        Started after
        <input
          type="datetime-local"
          data-testid="filter-since"
          value={toDatetimeLocal(query.since)}
          onChange={(e) => onChange({ since: fromDatetimeLocal(e.target.value) })}
        />
      </label>
      <label>
        before
        <input
          type="datetime-local"
          data-testid="filter-until"
          value={toDatetimeLocal(query.until)}
          onChange={(e) => onChange({ until: fromDatetimeLocal(e.target.value) })}
        />
      </label>
      <button type="button" data-testid="filter-reset" onClick={() => navigate({ view: "rollouts", query: DEFAULT_ROLLOUTS_QUERY })}>
        Reset
      </button>
    </div>
  );
}

/** A text filter that applies a short pause after typing stops, so each keystroke is not a query. */
function TextFilter(props: {
  label: string;
  testId: string;
  value: string | undefined;
  type?: string;
  onChange: (value: string | undefined) => void;
}) {
  const { label, testId, value, type = "text", onChange } = props;
  const [draft, setDraft] = useState(value ?? "");
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;
  useEffect(() => setDraft(value ?? ""), [value]);
  useEffect(() => {
    if (draft === (value ?? "")) return;
    const timer = setTimeout(() => onChangeRef.current(draft.trim() === "" ? undefined : draft.trim()), 300);
    return () => clearTimeout(timer);
  }, [draft, value]);
  return (
    <label>
      {label}
      <input type={type} data-testid={testId} value={draft} onChange={(e) => setDraft(e.target.value)} />
    </label>
  );
}

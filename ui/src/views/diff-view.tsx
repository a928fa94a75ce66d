import type { ResourceDiff } from "../lib/resources-diff.js";
import type { DiffRow } from "../lib/text-diff.js";

/** A side-by-side line diff. */
export function SideBySide({ rows, name }: { rows: DiffRow[]; name: string }) {
  return (
    <table className="diff" data-testid="template-diff" data-name={name}>
      <tbody>
        {rows.map((row, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: diff rows are a fixed list, in order
          <tr key={i}>
            <td className="ln">{row.left?.no ?? ""}</td>
            <td className={`dl ${row.left?.kind ?? "none"}`} data-testid={row.left?.kind === "removed" ? "diff-removed" : undefined}>
              {row.left?.text ?? ""}
            </td>
            <td className="ln">{row.right?.no ?? ""}</td>
            <td className={`dl ${row.right?.kind ?? "none"}`} data-testid={row.right?.kind === "added" ? "diff-added" : undefined}>
              {row.right?.text ?? ""}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** How two snapshots' resources differ, one block per resource name. */
export function ResourceDiffs({ diffs }: { diffs: ResourceDiff[] }) {
  return (
    <>
      {diffs.map((d) => (
        <div key={d.name} className={`rdiff ${d.change}`}>
          <h4>
            {d.name} <span className="muted">({d.kind.replace("_", " ")})</span> <span className={`chip ${d.change}`}>{d.change}</span>
          </h4>
          {d.fields ? (
            <table
              className="table"
              data-testid={d.kind === "llm" || d.kind === "proxy_llm" ? "llm-diff" : "field-diff"}
              data-name={d.name}
            >
              <tbody>
                {d.fields.map((f) => (
                  <tr key={f.field} className={f.changed ? "changed" : undefined}>
                    <th>{f.field}</th>
                    <td className={f.changed ? "dl removed" : undefined}>{f.a}</td>
                    <td className={f.changed ? "dl added" : undefined}>{f.b}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          {d.rows && d.kind !== "llm" && d.kind !== "proxy_llm" ? <SideBySide rows={d.rows} name={d.name} /> : null}
        </div>
      ))}
    </>
  );
}

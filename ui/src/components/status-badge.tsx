import { STATUS_COLORS } from "../lib/names.js";

/** A status name on its colour. */
export function StatusBadge({ status, testId }: { status: string; testId?: string }) {
  return (
    <span className={`badge badge-${status}`} data-testid={testId} data-status={status}>
      {status}
    </span>
  );
}

export const statusColor = (status: string) => STATUS_COLORS[status] ?? "#8c8c8c";

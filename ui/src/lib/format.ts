/** Formatters shared by every view. Times are Unix epoch seconds (the contract's unit); output is in UTC. */

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** `2026-12-01 17:57:15` (UTC), or `—` for an absent time. */
export function formatTime(epochSeconds: number | undefined): string {
  if (epochSeconds === undefined || !Number.isFinite(epochSeconds) || epochSeconds <= 0) return "—";
  const d = new Date(epochSeconds * 1000);
  return (
    `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
  );
}

/** A duration in seconds, at the precision that matters: `850 ms`, `12.3 s`, `4 m 05 s`, `2 h 03 m`, `3 d 04 h`. */
export function formatDuration(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} m ${pad(whole % 60)} s`;
  if (whole < 86_400) return `${Math.floor(whole / 3600)} h ${pad(Math.floor((whole % 3600) / 60))} m`;
  return `${Math.floor(whole / 86_400)} d ${pad(Math.floor((whole % 86_400) / 3600))} h`;
}

/** How long ago `epochSeconds` was, seen at `now`: `just now`, `12 s ago`, `4 m 05 s ago`; `never` when absent. */
export function formatAgo(epochSeconds: number | undefined, now: number): string {
  if (epochSeconds === undefined || epochSeconds <= 0) return "never";
  const age = now - epochSeconds;
  if (age < 1) return "just now";
  return `${formatDuration(age).replace(/\.\d+ s$/, " s")} ago`;
}

/** A duration between two times; when the end is absent, up to `now` (a run in progress). */
export function formatSpan(start: number | undefined, end: number | undefined, now: number): string {
  if (start === undefined || start <= 0) return "—";
  return formatDuration((end ?? now) - start);
}

const integerFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

/** `12,345`. */
export const formatCount = (n: number) => integerFormat.format(n);

/** A reward or score: up to 3 decimals, `—` when absent. */
export function formatReward(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "—";
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}

/** A logprob with its probability: `-0.105 (p=0.90)`. */
export function formatLogprob(logprob: number): string {
  return `${logprob.toFixed(3)} (p=${Math.exp(logprob).toFixed(2)})`;
}

/** Pretty JSON for display; strings stay as they are. */
export function formatJson(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2);
}

/** At most `max` characters, with an ellipsis when cut. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** Epoch seconds as the value of an `<input type="datetime-local">` (the browser's local time, to the minute). */
export function toDatetimeLocal(epochSeconds: number | undefined): string {
  if (epochSeconds === undefined) return "";
  const d = new Date(epochSeconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The epoch seconds of a `datetime-local` value; undefined when empty or invalid. */
export function fromDatetimeLocal(value: string): number | undefined {
  if (value === "") return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? ms / 1000 : undefined;
}

import { type ParseArgsConfig, parseArgs } from "node:util";

/** A command line the CLI cannot run; exits with code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** `parseArgs` (strict by default), its complaints (unknown flag, missing value…) as {@link UsageError}. */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

/** Throws {@link UsageError} unless `text` is an http(s) URL. */
export function checkUrl(text: string, flag: string): void {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`${flag} must be an http(s) URL, got "${text}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`${flag} must be an http(s) URL, got "${text}"`);
}

/** Parses an integer flag value in [min, max]; throws {@link UsageError}. */
export function integer(text: string, flag: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got "${text}"`);
  }
  return value;
}

/** Parses a flag's number of seconds ≥ 0 (`fallback` when absent); throws {@link UsageError}. */
export function seconds(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0) throw new UsageError(`${flag} needs a number of seconds ≥ 0, got "${value}"`);
  return n;
}

/** Where agl and agents write diagnostics. `console` fits; so do pino and winston loggers. */
export interface Logger {
  debug(message: string, ...details: unknown[]): void;
  info(message: string, ...details: unknown[]): void;
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

/** Levels in increasing severity; a logger drops messages below its level. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Options of {@link createConsoleLogger}. */
export interface ConsoleLoggerOptions {
  /** Written before every message, e.g. `[ro-1234 at-5678]`. */
  prefix?: string;
  /** Default: the AGL_LOG_LEVEL environment variable, else `info`. */
  level?: LogLevel;
}

/** A logger writing to stderr through `console`, with a prefix and a level. */
export function createConsoleLogger(options: ConsoleLoggerOptions = {}): Logger {
  const level = options.level ?? (process.env.AGL_LOG_LEVEL as LogLevel | undefined) ?? "info";
  const min = rank[level] ?? rank.info;
  const prefix = options.prefix ? `${options.prefix} ` : "";
  const at =
    (l: Exclude<LogLevel, "silent">) =>
    (message: string, ...details: unknown[]) => {
      if (rank[l] >= min) console.error(`agl ${l}: ${prefix}${message}`, ...details);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A logger that prefixes every message of `inner`. */
export function withPrefix(inner: Logger, prefix: string): Logger {
  return {
    debug: (m, ...d) => inner.debug(`${prefix} ${m}`, ...d),
    info: (m, ...d) => inner.info(`${prefix} ${m}`, ...d),
    warn: (m, ...d) => inner.warn(`${prefix} ${m}`, ...d),
    error: (m, ...d) => inner.error(`${prefix} ${m}`, ...d),
  };
}

/** Drops everything. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

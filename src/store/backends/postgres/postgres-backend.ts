import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { backoffMs, sleep } from "../../../core/retry.js";
import type { StorageBackend, StorageTx, StoreEvent, TransactionOptions } from "../../backend.js";
import { invalidArgument } from "../../errors.js";
import { classify, unavailable } from "./postgres-errors.js";
import { encodeEvents, EventListener } from "./postgres-events.js";
import { checkSchemaName, migrate } from "./postgres-schema.js";
import { StatementPipeline } from "./postgres-pipeline.js";
import { type Locking, PostgresTx } from "./postgres-tx.js";
import { createConsoleLogger, type Logger } from "../../../core/logger.js";

export interface PostgresBackendOptions {
  /** `postgres://user:password@host:port/database` (any libpq-style URL `pg` accepts). */
  connectionString: string;
  /**
   * Tables live in this schema, created when missing (default: the URL's `schema` parameter, else "agl"). Separate
   * stores may share a database in separate schemas.
   */
  schema?: string;
  /** Connections in the pool (default: the URL's `pool_size` parameter, else 10), plus one for LISTEN. */
  poolSize?: number;
  /**
   * Lock rows from the first run of every transaction on, instead of only when a run conflicted (see
   * `createPostgresBackend`). For tests and measurements; slower for reads.
   */
  alwaysLock?: boolean;
  /**
   * Where connection trouble (at most once per 5 seconds per kind) and failing event listeners are reported
   * (default: stderr, `[store]`).
   */
  logger?: Logger;
}

/** Runs of a transaction before a conflict reaches the caller. */
const MAX_CONFLICT_TRIES = 60;
/** Runs before a connection failure (that certainly committed nothing) reaches the caller as UNAVAILABLE. */
const MAX_CONNECTION_TRIES = 3;

const beginSnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ";
const beginReadOnly = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
const beginLocking = "BEGIN ISOLATION LEVEL READ COMMITTED";

const int8 = 20;
/** bigint columns (seq, sequence ids, counts) hold values far below 2^53: read them as numbers. */
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === int8 && format !== "binary"
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * A storage backend on PostgreSQL, for several store servers sharing one database. Connects, applies migrations
 * (under an advisory lock, so servers starting together do not race) and starts listening before it resolves.
 *
 * Concurrency. The store core reads whole rows and writes them back. A transaction first runs optimistically, in
 * REPEATABLE READ: reads take no locks and see one snapshot, so read-only calls never wait or fail, and when two
 * transactions write the same row the later one fails with a serialization error instead of losing an update. A run
 * that fails so (or by a deadlock, or by inserting a key another transaction inserted first) is run again from the
 * start after a jittered backoff, now pessimistically: READ COMMITTED, with the rollout, worker and resources rows it
 * reads locked (`FOR UPDATE`), so contended transactions (a worker's row, say, updated by its several rollouts at once)
 * queue up instead of failing again. Every transaction that writes an attempt reads (and so locks) its rollout first,
 * which serialises the attempts of one rollout.
 *
 * Across servers: dequeue takes queue rows with `FOR UPDATE SKIP LOCKED`, so a rollout is claimed once; span sequence
 * ids come from a counter row updated in the transaction; events travel by LISTEN/NOTIFY (postgres-events.ts); the
 * watchdog scans on one server at a time (an advisory lock). Connection failures reach callers as UNAVAILABLE and
 * never crash the process; the pool and the LISTEN connection reconnect by themselves.
 */
export async function createPostgresBackend(options: PostgresBackendOptions): Promise<StorageBackend> {
  const fromUrl = ourParameters(options.connectionString);
  const schema = options.schema ?? fromUrl.schema ?? "agl";
  checkSchemaName(schema);
  const poolSize = options.poolSize ?? fromUrl.poolSize;
  const backend = new PostgresBackend(
    { ...options, connectionString: fromUrl.connectionString, ...(poolSize === undefined ? {} : { poolSize }) },
    schema,
  );
  try {
    await backend.start();
  } catch (error) {
    await backend.close().catch(() => undefined);
    if (classify(error) === "connection") throw unavailable(error, false);
    throw error;
  }
  return backend;
}

class PostgresBackend implements StorageBackend {
  readonly name = "postgres";
  private readonly pool: pg.Pool;
  private readonly events: EventListener;
  private readonly alwaysLock: boolean;
  private readonly onError: (message: string, error: unknown) => void;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closing: Promise<void> | undefined;
  /** Names this backend's transactions in their notifications. */
  private readonly tokenPrefix = randomBytes(6).toString("hex");
  private transactions = 0;

  constructor(
    options: PostgresBackendOptions,
    private readonly schema: string,
  ) {
    this.alwaysLock = options.alwaysLock ?? false;
    const logger = options.logger ?? createConsoleLogger({ prefix: "[store]" });
    this.onError = rateLimitedLog(logger);
    const connection: pg.ClientConfig = {
      connectionString: options.connectionString,
      application_name: "agl-store",
      types,
      keepAlive: true,
      connectionTimeoutMillis: 15_000,
      // A server that stalls inside a transaction must not hold row locks forever.
      idle_in_transaction_session_timeout: 60_000,
    };
    // Pipelined: a transaction sends its writes without waiting for each (see StatementPipeline.send).
    this.pool = new pg.Pool({ ...connection, pipeline: true, max: options.poolSize ?? 10, idleTimeoutMillis: 30_000 });
    // Idle connections die when PostgreSQL restarts: the pool drops them; without a handler the process would crash.
    this.pool.on("error", (error) => this.onError("an idle database connection failed", error));
    this.events = new EventListener({
      connection,
      channel: `agl.${schema}`,
      schema,
      pool: this.pool,
      onError: this.onError,
      logger,
    });
  }

  async start(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await migrate(client, this.schema);
    } finally {
      client.release();
    }
    await this.events.start();
  }

  /**
   * `options.readOnly`, when the caller knows it, skips the guess: read-only transactions run in a read-only snapshot,
   * others lock rows from the first run (the store core does not pass it yet; `StorageBackend` has no such parameter).
   */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>, options?: TransactionOptions): Promise<T> {
    if (this.closing) return Promise.reject(new ConnectError("the store is closed", Code.Unavailable));
    const run = this.run(fn, options?.readOnly);
    this.inFlight.add(run);
    const forget = () => this.inFlight.delete(run);
    run.then(forget, forget);
    return run;
  }

  private async run<T>(fn: (tx: StorageTx) => Promise<T>, readOnly: boolean | undefined): Promise<T> {
    let conflicts = 0;
    let connectionFailures = 0;
    let locking: Locking = readOnly !== true && (this.alwaysLock || readOnly === false) ? "rows" : "snapshot";
    for (;;) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (error) {
        if (classify(error) !== "connection") throw error;
        if (++connectionFailures >= MAX_CONNECTION_TRIES) throw unavailable(error, false);
        await sleep(backoffMs(connectionFailures, 50, 500));
        continue;
      }
      // A checked-out connection has no error listener of the pool's: a failure between queries must not crash us.
      let broken: unknown;
      const onError = (error: unknown) => {
        broken ??= error;
      };
      client.on("error", onError);
      const pipeline = new StatementPipeline(client);
      const tx = new PostgresTx(pipeline, this.schema, locking, `agl.watchdog.${this.schema}`);
      let committing = false;
      /** COMMIT was sent: it ends the transaction, committed or (after a failed statement) rolled back. */
      let ended = false;
      try {
        // Statements are pipelined: BEGIN travels with the first read, writes with whatever follows them.
        pipeline.send(readOnly === true ? beginReadOnly : locking === "snapshot" ? beginSnapshot : beginLocking);
        const result = await fn(tx);
        tx.open = false;
        const token = payloadToken(this.tokenPrefix, ++this.transactions);
        if (tx.events.some((event) => event.kind === "resources")) await pipeline.settle(); // their version seqs
        const payloads = encodeEvents(tx.events, (update) => tx.versionSeq(update), token);
        if (payloads.length > 0) {
          pipeline.send("SELECT pg_notify($1, payload) FROM unnest($2::text[]) WITH ORDINALITY AS p(payload, n) ORDER BY n", [
            `agl.${this.schema}`,
            payloads,
          ]);
        }
        // Armed before COMMIT: the notifications may arrive as soon as it is done.
        const delivered = payloads.length > 0 ? this.events.delivered(token) : undefined;
        committing = true;
        ended = true;
        const commit = client.query("COMMIT").then(
          () => undefined,
          (error: unknown) => error ?? new Error("COMMIT failed"),
        );
        let failure: unknown;
        try {
          await pipeline.settle();
        } catch (error) {
          // A statement sent before COMMIT failed: the transaction was aborted and COMMIT rolled it back.
          failure = error;
          if (classify(error) !== "connection") committing = false;
        }
        const commitError = await commit;
        if (failure !== undefined || commitError !== undefined) {
          delivered?.cancel();
          throw failure ?? commitError;
        }
        client.off("error", onError);
        client.release();
        await delivered?.promise;
        return result;
      } catch (caught) {
        tx.open = false;
        const error = broken ?? pipeline.failure ?? caught;
        const kind = classify(error);
        if (!ended && kind !== "connection" && broken === undefined) {
          try {
            const rollback = client.query("ROLLBACK");
            await pipeline.settle().catch(() => undefined);
            await rollback;
          } catch {
            broken = error;
          }
        }
        client.off("error", onError);
        // A connection in an unknown state is closed instead of going back to the pool.
        client.release(kind === "connection" || broken !== undefined ? asError(error) : undefined);
        if (kind === "conflict" || (kind === "duplicate" && conflicts < 5)) {
          if (++conflicts < MAX_CONFLICT_TRIES) {
            locking = "rows";
            await sleep(backoffMs(conflicts, 1, 100));
            continue;
          }
        }
        if (kind === "connection") {
          // Before COMMIT was sent, nothing was stored: running again is safe. During COMMIT the outcome is unknown.
          if (!committing && ++connectionFailures < MAX_CONNECTION_TRIES) {
            await sleep(backoffMs(connectionFailures, 50, 500));
            continue;
          }
          throw unavailable(error, committing);
        }
        if (kind === "text") throw invalidArgument("text fields cannot contain NUL characters with PostgreSQL storage");
        throw error;
      }
    }
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    return this.events.subscribe(listener);
  }

  /** Refuses new transactions, lets those in flight finish, then closes the connections. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.inFlight]);
      await this.events.close();
      await this.pool.end();
    })();
    return this.closing;
  }
}

/**
 * Query parameters of the URL that are ours, not the driver's: `schema` and `pool_size`
 * (`postgres://host/db?schema=team_a&pool_size=20`). They are removed before the driver sees the URL.
 */
function ourParameters(connectionString: string): { connectionString: string; schema?: string; poolSize?: number } {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return { connectionString };
  }
  const schema = url.searchParams.get("schema") ?? undefined;
  const size = url.searchParams.get("pool_size");
  if (schema === undefined && size === null) return { connectionString };
  let poolSize: number | undefined;
  if (size !== null) {
    poolSize = Number(size);
    if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000) {
      throw new Error(`postgres store: pool_size must be an integer from 1 to 1000, got ${JSON.stringify(size)}`);
    }
  }
  url.searchParams.delete("schema");
  url.searchParams.delete("pool_size");
  return { connectionString: url.toString(), ...(schema === undefined ? {} : { schema }), ...(poolSize === undefined ? {} : { poolSize }) };
}

const payloadToken = (prefix: string, n: number) => `${prefix}.${n}`;

const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));

function rateLimitedLog(logger: Logger): (message: string, error: unknown) => void {
  const last = new Map<string, number>();
  return (message, error) => {
    const now = Date.now();
    if (now - (last.get(message) ?? 0) < 5_000) return;
    last.set(message, now);
    const reason = error instanceof Error ? error.message : error === undefined ? "" : String(error);
    logger.warn(`postgres: ${message}${reason ? `: ${reason}` : ""}`);
  };
}

import { Code, ConnectError } from "@connectrpc/connect";
import { createConsoleLogger, type Logger } from "../../../core/logger.js";
import Database from "better-sqlite3";
import type { StorageBackend, StorageTx, StoreEvent } from "../../backend.js";
import { createListeners, type Listeners } from "../../listeners.js";
import { createMutex } from "../../mutex.js";
import { type Checkpointer, type CheckpointerOptions, startCheckpointer } from "./sqlite-checkpointer.js";
import { StatementCache } from "./sqlite-queries.js";
import { RowCache } from "./sqlite-row-cache.js";
import { openSchema } from "./sqlite-schema.js";
import { prepareColumnUpdates, prepareStatements, type RowUpdates, type Statements } from "./sqlite-statements.js";
import { SqliteTx } from "./sqlite-tx.js";

export interface SqliteBackendOptions {
  /** Database file; ":memory:" for a private in-memory database. */
  path: string;
  /**
   * COMMITs after which WAL checkpoints move to a worker thread (default 32): a store that stays small (a test, a
   * one-off script) never starts the thread.
   */
  backgroundCheckpointAfter?: number;
  /** WAL frames (each a page: 8 KiB in a database this code created) past which writes pause between two transactions for the WAL to restart (default: 64 MiB of frames). */
  walRestartFrames?: number;
  /** How often the checkpoint thread looks for new commits (default 250 ms; see `CheckpointerOptions.intervalMs`). */
  checkpointIntervalMs?: number;
  /** Where failed rollbacks, checkpoints and event listeners are reported (default: stderr, `[store]`). */
  logger?: Logger;
  /**
   * How long spans are still kept after the last reader that asked for them stopped (`keepSpans`; default 30,000 ms):
   * a trainer reads each step's triplets on a stream of its own, opened once the step's rollouts are out.
   */
  keepSpansAfterReadersMs?: number;
}

/**
 * A storage backend on one SQLite file (better-sqlite3, WAL). Transactions are serialised in process by a promise
 * chain, so the synchronous driver is never re-entered from two of them, and run inside `BEGIN IMMEDIATE` … `COMMIT`
 * (several per COMMIT under load: see `transaction`), so other processes sharing the file see whole transactions.
 * Events reach `subscribe` listeners of this process after COMMIT; a rolled-back transaction's events are dropped.
 */
export function createSqliteBackend(options: SqliteBackendOptions): StorageBackend {
  return new SqliteBackend(
    options.path,
    options.backgroundCheckpointAfter ?? 32,
    options.logger ?? createConsoleLogger({ prefix: "[store]" }),
    { restartFrames: options.walRestartFrames, intervalMs: options.checkpointIntervalMs },
    options.keepSpansAfterReadersMs ?? 30_000,
  );
}

/** A call that ran to the end inside the open group; its answer waits for the group's COMMIT. */
interface GroupMember {
  events: StoreEvent[];
  resolve(): void;
  reject(error: unknown): void;
}

/** Most calls one COMMIT covers: under sustained load the queue may never empty, and answers must not wait long. */
const maxGroupSize = 64;

class SqliteBackend implements StorageBackend {
  readonly name = "sqlite";
  private readonly db: Database.Database;
  private readonly statements: Statements;
  private readonly updates: RowUpdates;
  private readonly cache: StatementCache;
  private readonly rows = new RowCache();
  /** `PRAGMA data_version` when this connection last began a transaction: another connection's commit changes it. */
  private dataVersion: number | undefined;
  private readonly listeners: Listeners;
  /** better-sqlite3 is synchronous but `fn` is async: one call at a time, in call order. */
  private readonly mutex = createMutex();
  /** Calls requested and not run to the end yet. */
  private outstanding = 0;
  /** Calls done inside the open `BEGIN IMMEDIATE`, waiting for its COMMIT. */
  private group: GroupMember[] | undefined;
  private commitScheduled = false;
  private commits = 0;
  private checkpointer: Checkpointer | undefined;
  /** The checkpoint thread found the WAL long: the next transaction waits for it to catch up, and restarts the WAL. */
  private walTooLong = false;
  private closed: Promise<void> | undefined;
  /** Readers that asked for the spans to be kept (`keepSpans`), and the timer that stops keeping them after the last. */
  private spanKeepers = 0;
  private stopKeepingSpans: NodeJS.Timeout | undefined;

  constructor(
    private readonly path: string,
    private readonly backgroundCheckpointAfter: number,
    private readonly logger: Logger,
    private readonly checkpoints: Pick<CheckpointerOptions, "restartFrames" | "intervalMs">,
    private readonly keepSpansAfterReadersMs: number,
  ) {
    this.listeners = createListeners(logger);
    this.db = new Database(path);
    try {
      openSchema(this.db);
      this.statements = prepareStatements(this.db);
      this.updates = prepareColumnUpdates(this.db, this.statements);
    } catch (error) {
      this.db.close();
      throw error;
    }
    this.cache = new StatementCache(this.db);
  }

  /**
   * Group commit: COMMIT in WAL mode costs far more than a typical call's statements, so calls that queue up behind
   * each other share one. Each call after the first runs in its own savepoint (its failure undoes only its writes); the
   * group commits when no call is running or waiting, after the event loop's current turn (or once it reaches
   * {@link maxGroupSize}), and only then are its calls answered and their events delivered.
   */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ConnectError("the store is closed", Code.Unavailable));
    this.outstanding++;
    return new Promise<T>((resolve, reject) => {
      void this.mutex.run(async () => {
        try {
          await this.runCall(fn, resolve, reject);
        } finally {
          this.outstanding--;
          if ((this.group?.length ?? 0) >= maxGroupSize) this.commitGroup();
          else if (this.outstanding === 0) this.scheduleCommit();
        }
      });
    });
  }

  private async runCall<T>(
    fn: (tx: StorageTx) => Promise<T>,
    resolve: (value: T) => void,
    reject: (error: unknown) => void,
  ): Promise<void> {
    const s = this.statements;
    const tx = new SqliteTx(s, this.updates, this.cache, this.rows);
    // The first call of a group needs no savepoint of its own: undoing it is undoing the transaction.
    let first = false;
    let result: T;
    try {
      if (!this.group) {
        if (this.walTooLong) {
          this.walTooLong = false;
          await this.checkpointer?.catchUp();
        }
        s.begin.run();
        this.group = [];
        first = true;
        this.forgetOthersWrites();
      } else s.savepoint.run();
      result = await fn(tx);
      tx.finish();
      tx.open = false;
      if (!first) s.release.run();
    } catch (error) {
      tx.open = false;
      tx.forgetWrites();
      this.undoCall(error, first);
      reject(error);
      return;
    }
    this.group.push({ events: tx.events, resolve: () => resolve(result), reject });
  }

  /** Clears the row cache if another connection (another server on the file, a script) committed since we last looked. */
  private forgetOthersWrites(): void {
    const version = this.statements.dataVersion.get() as number;
    if (version !== this.dataVersion) this.rows.clear();
    this.dataVersion = version;
  }

  /**
   * Undoes a failed call's writes, keeping the group's (the first call of a group: the transaction, which holds only
   * its writes); if SQLite ended the whole transaction, the group fails.
   */
  private undoCall(error: unknown, first: boolean): void {
    if (!this.group) return;
    if (this.db.inTransaction) {
      try {
        if (first) {
          this.statements.rollback.run();
          this.group = undefined;
        } else {
          this.statements.rollbackToSavepoint.run();
          this.statements.release.run();
        }
        return;
      } catch (undoError) {
        this.logger.error("sqlite: rolling back a call failed", undoError);
      }
    }
    // Some errors (SQLITE_FULL, SQLITE_IOERR…) end the transaction by themselves: the other calls' writes are gone.
    this.failGroup(error);
  }

  /**
   * Commits once the requests already read from the network have run: their calls start one by one as the event loop
   * hands over each request, so the group commits in the check phase after the current poll phase.
   */
  private scheduleCommit(): void {
    if (this.commitScheduled || !this.group) return;
    this.commitScheduled = true;
    setImmediate(() => {
      this.commitScheduled = false;
      // A call still running (it awaits something outside the database) commits the group when it ends.
      if (this.outstanding === 0) this.commitGroup();
    });
  }

  private commitGroup(): void {
    const group = this.group;
    if (!group) return;
    try {
      this.statements.commit.run();
    } catch (error) {
      this.failGroup(error);
      return;
    }
    this.group = undefined;
    if (++this.commits === this.backgroundCheckpointAfter && this.path !== ":memory:") this.startCheckpoints();
    for (const member of group) for (const event of member.events) this.listeners.deliver(event);
    for (const member of group) member.resolve();
  }

  private startCheckpoints(): void {
    this.checkpointer = startCheckpointer({
      path: this.path,
      onActive: (active) => {
        if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${active ? 0 : 1000}`);
      },
      ...this.checkpoints,
      onLongWal: () => {
        this.walTooLong = true;
      },
      logger: this.logger,
    });
  }

  private failGroup(error: unknown): void {
    const group = this.group ?? [];
    this.group = undefined;
    this.rows.clear();
    if (this.db.inTransaction) {
      try {
        this.statements.rollback.run();
      } catch (rollbackError) {
        this.logger.error("sqlite: rollback failed", rollbackError);
      }
    }
    for (const member of group) member.reject(error);
  }

  keepSpans(): () => void {
    clearTimeout(this.stopKeepingSpans);
    this.spanKeepers++;
    this.rows.keepSpans(true);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.spanKeepers > 0) return;
      this.stopKeepingSpans = setTimeout(() => this.rows.keepSpans(false), this.keepSpansAfterReadersMs).unref();
    };
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    return this.listeners.subscribe(listener);
  }

  /** Closes the database after the transactions already requested; later ones are refused. Idempotent. */
  close(): Promise<void> {
    clearTimeout(this.stopKeepingSpans);
    this.closed ??= this.mutex.run(async () => {
      this.commitGroup();
      await this.checkpointer?.stop();
      this.listeners.clear();
      if (this.db.open) this.db.close();
    });
    return this.closed;
  }
}

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
import { PendingWorkerRows } from "./sqlite-worker-rows.js";

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

/** A call: its transaction's body, and where its answer goes. */
interface Call {
  fn: (tx: StorageTx) => Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** A call that ran to the end inside the open group; its answer waits for the group's COMMIT. */
interface GroupMember {
  call: Call;
  result: unknown;
  /** What it did (its events, the rows it wrote): forgotten if the group's transaction is rolled back. */
  tx: SqliteTx;
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
  private readonly pendingWorkers = new PendingWorkerRows();
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
   * each other share one. The group commits when no call is running or waiting, after the event loop's current turn
   * (or once it reaches {@link maxGroupSize}), and only then are its calls answered and their events delivered.
   *
   * A call that fails undoes only its own writes, without a savepoint for each call: one costs its SAVEPOINT and
   * RELEASE and, worse, a copy of every page the call then changes (a tenth of `bench/store/in-process.ts`'s CPU a
   * rollout). Most failures come before a call wrote anything (a rollout not found, a refused transition): nothing
   * to undo. One that wrote rolls the group's transaction back, and the calls before it run again in a new one, as a
   * transaction body may (the PostgreSQL backend runs a conflicting one again too); their answers had not gone out.
   */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ConnectError("the store is closed", Code.Unavailable));
    this.outstanding++;
    return new Promise<T>((resolve, reject) => {
      void this.mutex.run(async () => {
        try {
          await this.runCall({ fn, resolve: resolve as (value: unknown) => void, reject });
        } finally {
          this.outstanding--;
          if ((this.group?.length ?? 0) >= maxGroupSize) this.commitGroup();
          else if (this.outstanding === 0) this.scheduleCommit();
        }
      });
    });
  }

  private async runCall(call: Call): Promise<void> {
    const s = this.statements;
    const tx = new SqliteTx(s, this.updates, this.cache, this.rows, this.pendingWorkers);
    const first = !this.group;
    let result: unknown;
    try {
      if (!this.group) {
        if (this.walTooLong) {
          this.walTooLong = false;
          await this.checkpointer?.catchUp();
        }
        s.begin.run();
        this.group = [];
        this.forgetOthersWrites();
      }
      result = await call.fn(tx);
      tx.finish();
      tx.open = false;
    } catch (error) {
      tx.open = false;
      tx.forgetWrites();
      await this.undoCall(error, first || tx.wrote);
      call.reject(error);
      return;
    }
    this.group.push({ call, result, tx });
  }

  /** Clears the row cache if another connection (another server on the file, a script) committed since we last looked. */
  private forgetOthersWrites(): void {
    const version = this.statements.dataVersion.get() as number;
    if (version !== this.dataVersion) this.rows.clear();
    this.dataVersion = version;
  }

  /**
   * After a call failed: when it wrote, rolls the group's transaction back and runs the calls before it again in a new
   * one; if SQLite ended the transaction itself (SQLITE_FULL, SQLITE_IOERR…), the group fails.
   */
  private async undoCall(error: unknown, wrote: boolean): Promise<void> {
    const group = this.group;
    if (!group) return;
    if (!this.db.inTransaction) {
      this.failGroup(error);
      return;
    }
    if (!wrote) return;
    try {
      this.statements.rollback.run();
    } catch (rollbackError) {
      this.logger.error("sqlite: rolling back a failed call's group failed", rollbackError);
      this.failGroup(error);
      return;
    }
    this.pendingWorkers.clear();
    this.group = undefined;
    for (const member of group) member.tx.forgetWrites();
    for (const member of group) await this.runCall(member.call);
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
      this.pendingWorkers.write(this.statements.putWorker);
      this.statements.commit.run();
    } catch (error) {
      this.failGroup(error);
      return;
    }
    this.group = undefined;
    if (++this.commits === this.backgroundCheckpointAfter && this.path !== ":memory:") this.startCheckpoints();
    for (const member of group) for (const event of member.tx.events) this.listeners.deliver(event);
    for (const member of group) member.call.resolve(member.result);
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
    this.pendingWorkers.clear();
    if (this.db.inTransaction) {
      try {
        this.statements.rollback.run();
      } catch (rollbackError) {
        this.logger.error("sqlite: rollback failed", rollbackError);
      }
    }
    for (const member of group) member.call.reject(error);
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

import type pg from "pg";
import { type Corkable, corkUntil } from "../../../core/cork-until.js";
import { statementName } from "./postgres-rows.js";

/**
 * The statements of one transaction on one pooled connection (a pool made with `pipeline: true`): those whose result
 * nobody needs are sent without waiting, and the socket's writes are corked until the end of the tick, so a
 * transaction's statements share round trips and system calls.
 */
export class StatementPipeline {
  /**
   * The first failure of a statement sent without waiting (see `send`). It aborted the transaction, so every later
   * statement fails too, with a less telling error: this one is the cause.
   */
  failure: unknown;
  /** Statements sent and not yet answered. */
  private readonly sent: Array<Promise<unknown>> = [];
  private readonly corkForTick = corkUntil(process.nextTick);

  constructor(private readonly client: pg.ClientBase) {}

  /** Runs a prepared statement and returns its rows; after an earlier failure, throws that failure. */
  async query(text: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> {
    this.cork();
    try {
      const result = await this.client.query({ name: statementName(text), text, values });
      return result.rows as Array<Record<string, unknown>>;
    } catch (error) {
      throw this.failure ?? error;
    }
  }

  /**
   * Sends a statement whose result nobody needs without waiting for it: the connection pipelines it with the
   * statements that follow, saving a round trip per write. Its failure is kept in `failure` and reported by the next
   * statement, by `settle`, or at COMMIT (which then rolls back).
   */
  send(text: string, values: unknown[] = []): void {
    this.cork();
    this.sent.push(
      this.client.query(values.length > 0 ? { name: statementName(text), text, values } : text).catch((error: unknown) => {
        this.failure ??= error;
      }),
    );
  }

  /** Waits for every statement sent; throws the first failure. */
  async settle(): Promise<void> {
    while (this.sent.length > 0) await Promise.all(this.sent.splice(0));
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * Holds the socket's writes until the end of this tick, so that the statements issued together (a transaction's
   * writes and COMMIT, say) leave in one system call rather than one each.
   */
  private cork(): void {
    const stream = (this.client as unknown as { connection?: { stream?: Partial<Corkable> } }).connection?.stream;
    if (stream?.cork && stream.uncork) this.corkForTick(stream as Corkable);
  }
}

import { fromBinary } from "@bufbuild/protobuf";
import { encodeMessage } from "../../../encoding/generated-encoder.js";
import pg from "pg";
import { backoffMs, sleep, withRetries } from "../../../core/retry.js";
import { type ResourcesUpdate, ResourcesUpdateSchema, RolloutStatus } from "../../../gen/agl/v1/types_pb.js";
import type { StoreEvent } from "../../backend.js";
import type { Logger } from "../../../core/logger.js";
import { createListeners, type Listeners } from "../../listeners.js";

/**
 * Store events across servers sharing one database, over LISTEN/NOTIFY. A transaction queues its events as
 * `pg_notify` calls just before COMMIT, so they are delivered exactly when (and only if) it commits, to every
 * server, in commit order. Each backend holds one dedicated LISTEN connection and hands the events to its
 * subscribers in the order they arrive, including its own: one path for all events keeps their order.
 *
 * NOTIFY payloads are limited to 8,000 bytes. A resources version is inlined when it fits and otherwise announced by
 * (id, version, seq) only; the listener then loads it from `resource_versions`. After losing its connection, the
 * listener reconnects with backoff and makes up for what it may have missed: a `queued` event (waiting dequeues
 * look again), a `finished` event for rollouts that finished meanwhile, and every resources version stored meanwhile.
 */

/** Longest payload we send (PostgreSQL's limit is 8,000 bytes including the terminator). */
const MAX_PAYLOAD = 7_900;

/** `o`, on the last payload of a transaction, names the transaction so that its server knows when it arrived. */
type Payload = ({ k: "q" } | { k: "f"; ids: string[] } | { k: "r"; id: string; v: number; s: number; d?: string }) & { o?: string };

/**
 * The notification payloads for a transaction's events, deduplicated and each within the size limit; the last one
 * carries `token`.
 */
export function encodeEvents(events: StoreEvent[], versionSeq: (update: ResourcesUpdate) => number, token: string): string[] {
  const out = new Set<string>();
  for (const event of events) {
    if (event.kind === "queued") out.add(JSON.stringify({ k: "q" } satisfies Payload));
    else if (event.kind === "finished") {
      // Rollout ids are short, but a watchdog pass may finish many rollouts at once: split to stay within the limit.
      let ids: string[] = [];
      let size = 20;
      for (const id of event.rolloutIds) {
        if (ids.length > 0 && size + id.length + 4 > MAX_PAYLOAD) {
          out.add(JSON.stringify({ k: "f", ids } satisfies Payload));
          ids = [];
          size = 20;
        }
        ids.push(id);
        size += JSON.stringify(id).length + 1;
      }
      if (ids.length > 0) out.add(JSON.stringify({ k: "f", ids } satisfies Payload));
    } else {
      const { update } = event;
      const ref: Payload = { k: "r", id: update.resourcesId, v: update.version, s: versionSeq(update) };
      const inline = JSON.stringify({ ...ref, d: Buffer.from(encodeMessage(ResourcesUpdateSchema, update)).toString("base64") });
      out.add(Buffer.byteLength(inline) <= MAX_PAYLOAD - 100 ? inline : JSON.stringify(ref));
    }
  }
  const payloads = [...out];
  const last = payloads.length - 1;
  if (last >= 0) payloads[last] = `${payloads[last]!.slice(0, -1)},"o":${JSON.stringify(token)}}`;
  return payloads;
}

export interface EventListenerOptions {
  /** Connection settings of the dedicated LISTEN connection. */
  connection: pg.ClientConfig;
  /** NOTIFY channel (one per schema). */
  channel: string;
  schema: string;
  /** For loading resources versions and making up for missed events. */
  pool: pg.Pool;
  /** Reports connection trouble (rate limited by the caller's logger). */
  onError: (message: string, error: unknown) => void;
  /** Where a failing event listener is reported. */
  logger: Logger;
}

/** The dedicated LISTEN connection of one backend; `start` resolves once it listens. */
export class EventListener {
  private readonly listeners: Listeners;
  private client: pg.Client | undefined;
  /** Deliveries in arrival order (a resources version may need a query first). */
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private reconnecting = false;
  /** The highest resource_versions.seq delivered, for catching up after a reconnect. */
  private lastVersionSeq = 0;
  /** Numbers the LISTEN connections, so that a notification tells which connection brought it. */
  private connections = 0;
  /**
   * Set by a disconnect until a later connection listens and catches up: since when (seconds) events may have been
   * missed, and the last connection lost.
   */
  private missed: { since: number; connection: number } | undefined;
  /**
   * Seqs of versions a catch-up delivered: their notifications may still arrive (committed between LISTEN and the
   * catch-up's query) and must not deliver them twice.
   */
  private caughtUp = new Set<number>();
  /** Transactions of this backend waiting for their events to be delivered here, by token. */
  private readonly pending = new Map<string, () => void>();

  constructor(private readonly options: EventListenerOptions) {
    this.listeners = createListeners(options.logger);
  }

  async start(): Promise<void> {
    const { rows } = await this.options.pool.query<{ seq: string | null }>(
      `SELECT max(seq) AS seq FROM ${this.options.schema}.resource_versions`,
    );
    this.lastVersionSeq = Number(rows[0]?.seq ?? 0);
    await this.connect();
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    return this.listeners.subscribe(listener);
  }

  /**
   * Resolves once the notifications of the transaction named `token` have been delivered to this backend's
   * subscribers (so that, as with the other backends, a transaction's events precede its return), or at once when
   * not listening, or after `timeoutMs`. `cancel` stops waiting (the transaction did not commit).
   */
  delivered(token: string, timeoutMs = 2_000): { promise: Promise<void>; cancel(): void } {
    if (!this.client || this.closed) return { promise: Promise.resolve(), cancel: () => {} };
    let done = () => {};
    const promise = new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), timeoutMs).unref();
      done = () => {
        clearTimeout(timer);
        this.pending.delete(token);
        resolve();
      };
      this.pending.set(token, done);
    });
    return { promise, cancel: () => done() };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const done of [...this.pending.values()]) done();
    this.listeners.clear();
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
    await this.chain;
  }

  /** Resolves with the connection's number once it listens. */
  private async connect(): Promise<number> {
    const client = new pg.Client({ ...this.options.connection, keepAlive: true });
    const connection = ++this.connections;
    let live = true;
    const lost = (error?: unknown) => {
      if (this.client !== client) return;
      live = false;
      this.client = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.missed = { since: this.missed?.since ?? Date.now() / 1000, connection };
      for (const done of [...this.pending.values()]) done();
      this.options.onError("lost its LISTEN connection; reconnecting", error);
      void this.reconnect();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    client.on("notification", (message) => {
      if (live && message.channel === this.options.channel && message.payload !== undefined) this.receive(message.payload, connection);
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.options.channel}"`);
    } catch (error) {
      client.removeAllListeners("end");
      client.on("error", () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) await client.end().catch(() => undefined);
    else this.client = client;
    return connection;
  }

  private async reconnect(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    try {
      for (let attempt = 0; !this.closed; attempt++) {
        await sleep(backoffMs(attempt + 1, 100, 5_000), { unref: true });
        if (this.closed) return;
        let connection: number;
        try {
          connection = await this.connect();
        } catch (error) {
          if (attempt % 10 === 0) this.options.onError("cannot reconnect its LISTEN connection yet", error);
          continue;
        }
        this.enqueue(() => this.catchUp(connection));
        return;
      }
    } finally {
      this.reconnecting = false;
    }
  }

  private receive(payload: string, connection: number): void {
    let parsed: Payload;
    try {
      parsed = JSON.parse(payload) as Payload;
    } catch {
      return;
    }
    this.enqueue(async () => {
      await this.catchUp(connection);
      switch (parsed.k) {
        case "q":
          this.emit({ kind: "queued" });
          break;
        case "f":
          this.emit({ kind: "finished", rolloutIds: parsed.ids });
          break;
        case "r": {
          if (this.caughtUp.delete(parsed.s)) break;
          const update = parsed.d
            ? fromBinary(ResourcesUpdateSchema, Buffer.from(parsed.d, "base64"))
            : await this.loadVersion(parsed.id, parsed.v);
          this.lastVersionSeq = Math.max(this.lastVersionSeq, parsed.s);
          if (update) this.emit({ kind: "resources", update });
          break;
        }
      }
      if (parsed.o !== undefined) this.pending.get(parsed.o)?.();
    });
  }

  private enqueue(step: () => Promise<void>): void {
    this.chain = this.chain.then(step).catch((error: unknown) => {
      this.options.onError("could not deliver an event", error);
    });
  }

  private emit(event: StoreEvent): void {
    if (!this.closed) this.listeners.deliver(event);
  }

  private async loadVersion(id: string, version: number): Promise<ResourcesUpdate | undefined> {
    const { rows } = await withRetries(
      () =>
        this.options.pool.query<{ data: Uint8Array }>(
          `SELECT data FROM ${this.options.schema}.resource_versions WHERE resources_id = $1 AND version = $2`,
          [id, version],
        ),
      { tries: 6, retryable: () => !this.closed },
    );
    return rows[0] && fromBinary(ResourcesUpdateSchema, rows[0].data);
  }

  /**
   * Once `connection` listens after a disconnect (a no-op otherwise): what other servers may have announced while
   * this one was not listening. Queued by the reconnect and before each notification, as the new connection's first
   * notifications can come in the read that brings LISTEN's reply, ahead of the reconnect's own continuation; a
   * notification the lost connection brought before it went does not count.
   */
  private async catchUp(connection: number): Promise<void> {
    const missed = this.missed;
    if (this.closed || !missed || connection <= missed.connection) return;
    this.missed = undefined;
    this.caughtUp.clear();
    const { schema, pool } = this.options;
    this.emit({ kind: "queued" });
    // Rollout times come from the servers' clocks: allow for some skew between them.
    const finished = await pool.query<{ rollout_id: string }>(
      `SELECT rollout_id FROM ${schema}.rollouts WHERE status = ANY($1::integer[]) AND end_time >= $2 ORDER BY seq`,
      [[RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED], missed.since - 30],
    );
    if (finished.rows.length > 0) this.emit({ kind: "finished", rolloutIds: finished.rows.map((row) => row.rollout_id) });
    const { rows } = await pool.query<{ seq: string; data: Uint8Array }>(
      `SELECT seq, data FROM ${schema}.resource_versions WHERE seq > $1 ORDER BY seq`,
      [this.lastVersionSeq],
    );
    for (const row of rows) {
      const seq = Number(row.seq);
      this.lastVersionSeq = Math.max(this.lastVersionSeq, seq);
      this.caughtUp.add(seq);
      this.emit({ kind: "resources", update: fromBinary(ResourcesUpdateSchema, row.data) });
    }
  }
}

/** The longest a Node timer waits: it fires one set for longer at once (after 1 ms). */
export const longestTimerMs = 2 ** 31 - 1;

/**
 * One timer for the deadlines of many operations in flight (the calls of one stream), where a timer each would cost
 * more than a small call's own work (docs/benchmarks.md). It is armed for the earliest deadline it was told of.
 * Operations that end leave it be: when it fires, `due` ends what is past its deadline (given the time, epoch ms) and
 * returns the earliest deadline left (`Infinity`: none), for which it is armed again. Unless `keepAlive`, the timer does
 * not keep the process alive.
 */
export class DeadlineTimer {
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;

  constructor(
    private readonly due: (now: number) => number,
    private readonly options: { keepAlive?: boolean } = {},
  ) {}

  /** An operation with this deadline (epoch ms; `Infinity`: none) began. */
  add(deadline: number): void {
    if (deadline < this.armedFor) this.arm(deadline);
  }

  /** Disarms the timer; a later `add` arms it again. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
  }

  private arm(deadline: number): void {
    clearTimeout(this.timer);
    this.armedFor = deadline;
    // A deadline further off than a timer can wait is waited for in steps.
    this.timer = setTimeout(this.fire, Math.min(longestTimerMs, Math.max(0, deadline - Date.now())));
    if (!this.options.keepAlive) this.timer.unref();
  }

  private readonly fire = () => {
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    const next = this.due(Date.now());
    if (next < Number.POSITIVE_INFINITY) this.arm(next);
  };
}

/**
 * A {@link DeadlineTimer}'s `due` over items that carry their deadline: ends (`expire`) those past it at `now`, and
 * returns the earliest deadline of the others (`Infinity`: none). An item may leave its Map or Set as it expires.
 */
export function expirePast<T extends { deadline: number }>(items: Iterable<T>, now: number, expire: (item: T) => void): number {
  let next = Number.POSITIVE_INFINITY;
  for (const item of items) {
    if (item.deadline <= now) expire(item);
    else next = Math.min(next, item.deadline);
  }
  return next;
}

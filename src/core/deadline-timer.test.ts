import { setTimeout as wait } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { DeadlineTimer, expirePast } from "./deadline-timer.js";

/** A timer over a set of deadlines, as a stream's calls use it: `due` ends the past ones and gives the next. */
function deadlines() {
  const pending = new Set<number>();
  const ended: number[] = [];
  let fired = 0;
  const timer = new DeadlineTimer((now) => {
    fired++;
    let next = Number.POSITIVE_INFINITY;
    for (const deadline of pending) {
      if (deadline <= now) {
        pending.delete(deadline);
        ended.push(deadline);
      } else next = Math.min(next, deadline);
    }
    return next;
  });
  const add = (deadline: number) => {
    pending.add(deadline);
    timer.add(deadline);
  };
  return { timer, pending, ended, add, fired: () => fired };
}

describe("DeadlineTimer", () => {
  it("ends each deadline when it comes, the earliest first, an earlier one added later included", async () => {
    const d = deadlines();
    const start = Date.now();
    d.add(start + 120);
    d.add(start + 160);
    d.add(start + 40);
    await wait(80);
    expect(d.ended).toEqual([start + 40]);
    await wait(150);
    expect(d.ended).toEqual([start + 40, start + 120, start + 160]);
    expect(d.pending.size).toBe(0);
  });

  it("fires once for the deadlines that ended first, not once for each", async () => {
    const d = deadlines();
    const start = Date.now();
    for (let i = 0; i < 50; i++) d.add(start + 30 + i);
    d.pending.clear(); // every operation ended before its deadline
    await wait(120);
    expect(d.fired()).toBe(1);
    expect(d.ended).toEqual([]);
  });

  it("does not fire for a deadline further off than a Node timer can wait, nor after stop", async () => {
    const d = deadlines();
    d.add(Date.now() + 2 ** 32);
    const stopped = deadlines();
    stopped.add(Date.now() + 20);
    stopped.timer.stop();
    await wait(60);
    expect(d.fired()).toBe(0);
    expect(stopped.fired()).toBe(0);
    d.timer.stop();
  });

  it("expirePast ends the items past their deadline, which may leave their Map, and gives the earliest of the rest", () => {
    const items = new Map([1, 5, 3, 9, 7].map((deadline) => [deadline, { deadline }]));
    const expired: number[] = [];
    const next = expirePast(items.values(), 5, (item) => {
      expired.push(item.deadline);
      items.delete(item.deadline);
    });
    expect(expired).toEqual([1, 5, 3]);
    expect(next).toBe(7);
    expect([...items.keys()]).toEqual([9, 7]);
    expect(expirePast(new Set<{ deadline: number }>(), 5, () => {})).toBe(Number.POSITIVE_INFINITY);
  });
});

import type { Writable } from "node:stream";

/** What {@link corkUntil} needs of a stream. */
export type Corkable = Pick<Writable, "cork" | "uncork">;

/**
 * Holds a stream's writes until `later` calls back, so that what is written meanwhile leaves in one system call rather
 * than one each: `process.nextTick` for the end of this tick, `setImmediate` for the end of this turn of the event
 * loop. Returns a function that corks the stream, at most once until then; the uncork is left out when `ended()`
 * says the stream was ended meanwhile (an HTTP answer's `end` uncorks its connection itself, and the connection may
 * carry the next answer by then).
 */
export function corkUntil(later: (uncork: () => void) => void): (stream: Corkable, ended?: () => boolean) => void {
  let corked = false;
  return (stream, ended) => {
    if (corked) return;
    corked = true;
    stream.cork();
    later(() => {
      corked = false;
      if (!ended?.()) stream.uncork();
    });
  };
}

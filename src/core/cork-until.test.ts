import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { corkUntil } from "./cork-until.js";

/** A stream that records how many chunks each system call would carry (one `writev` or `write` each). */
function recordingStream() {
  const calls: number[] = [];
  const stream = new Writable({
    write(_chunk, _encoding, done) {
      calls.push(1);
      done();
    },
    writev(chunks, done) {
      calls.push(chunks.length);
      done();
    },
  });
  return { stream, calls };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("corkUntil", () => {
  it("sends what one turn writes together, and each later turn's on its own", async () => {
    const { stream, calls } = recordingStream();
    const cork = corkUntil(setImmediate);
    for (const text of ["a", "b", "c"]) {
      cork(stream);
      stream.write(text);
    }
    expect(calls).toEqual([]);
    await turn();
    expect(calls).toEqual([3]);
    cork(stream);
    stream.write("d");
    await turn();
    expect(calls).toEqual([3, 1]);
  });

  it("leaves the uncork out once the stream was ended, whose end sent what was held", async () => {
    const { stream, calls } = recordingStream();
    const cork = corkUntil(setImmediate);
    cork(stream, () => stream.writableEnded);
    stream.write("a");
    stream.end("b");
    expect(calls).toEqual([2]);
    stream.cork(); // corked by someone else after the end: the pending uncork must not undo it
    await turn();
    expect(stream.writableCorked).toBe(1);
  });
});

/**
 * The answers of a request stream whose requests run concurrently: `answer` runs on each request as it arrives, at
 * most `maxInFlight` at once (the stream reads no further until one is done), and its results are yielded as they
 * complete; `undefined` is not yielded. The stream ends once the requests have ended and every one is answered; a
 * failure of the request stream itself ends it with that error. `answer` reports a request's own failure in its
 * result: it must not reject. `unasked`, when given, gets a function that sends a message of the server's own between
 * the answers (one sent after the stream ended goes nowhere).
 */
export async function* answerConcurrently<Request, Answer>(
  requests: AsyncIterable<Request>,
  answer: (request: Request) => Promise<Answer | undefined>,
  maxInFlight: number,
  unasked?: (send: (message: Answer) => void) => void,
): AsyncIterable<Answer> {
  const ready: Answer[] = [];
  let inFlight = 0;
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  let room: (() => void) | undefined;
  const signal = () => {
    wake?.();
    wake = undefined;
  };
  unasked?.((message) => {
    ready.push(message);
    signal();
  });
  const run = async (request: Request) => {
    const result = await answer(request);
    if (result !== undefined) ready.push(result);
    inFlight--;
    room?.();
    room = undefined;
    signal();
  };
  const reading = (async () => {
    try {
      for await (const request of requests) {
        if (inFlight >= maxInFlight) await new Promise<void>((resolve) => (room = resolve));
        inFlight++;
        void run(request);
      }
    } catch (error) {
      failure = error;
    } finally {
      ended = true;
      signal();
    }
  })();
  while (true) {
    while (ready.length > 0) yield ready.shift() as Answer;
    if (failure !== undefined) throw failure;
    if (ended && inFlight === 0) break;
    await new Promise<void>((resolve) => (wake = resolve));
  }
  await reading;
}

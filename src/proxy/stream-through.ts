import type * as http from "node:http";
import { corkUntil } from "../core/cork-until.js";
import type { AnswerIds, StreamWriter } from "./client-api.js";
import { type CallKind, type CompletionRecord, createStreamAssembler } from "./completion-reader.js";
import { createSseSplitter } from "./sse-splitter.js";
import type { UpstreamResponse } from "./upstream.js";

/** The call a stream answers. */
export interface StreamedCall {
  kind: CallKind;
  spanId: string;
  /** False for a call that is not recorded: its events are passed through, not read. */
  assemble: boolean;
  /** Turns each engine chunk into the chat chunks it stands for (token-in mode: completions chunks); default as is. */
  toChat?: { push(chunk: Record<string, unknown>): Record<string, unknown>[]; end(): Record<string, unknown>[] };
  /** Writes the client's stream in its own API from the chat chunks; without it the engine's events pass through. */
  writer?: StreamWriter;
}

/** What a streamed answer held: the completion assembled from its events, and how it ended. */
export interface StreamResult {
  completion: CompletionRecord;
  error: { type: string; message: string } | undefined;
}

/** How a streamed answer ended. */
export interface StreamOutcome {
  /**
   * The completion and the error. Of a stream passed through as the engine sent it, the events of the engine's last
   * read are read only when first asked, so that reading them (a JSON parse per event) is not on the answer's path
   * when the span is stored after the answer.
   */
  result(): StreamResult;
  /** Sends what was held back (`[DONE]`) and ends the answer. */
  release(): void;
}

/**
 * How many events of earlier reads a stream passed through unread gathers before it reads them: reading each read's in
 * a turn of its own cost more CPU a stream than reading them all at the end (110 ms against 97 for 2,000 events, noisy);
 * 32 hold ~10 KB and take ~0.1 ms to read.
 */
const catchUpEvents = 32;

/**
 * Passes an engine's server-sent events to the client as each one completes, and assembles ids, logprobs, content
 * and tool calls from them on the way (for events passed through as they are, those of the engine's last read when
 * asked, once the stream ended).
 * The final `data: [DONE]` is held back until {@link StreamOutcome.release}, so the span can be stored before the
 * client sees the end. A slow client slows the engine's stream (backpressure); a client that leaves stops it.
 */
export function streamThrough(
  upstream: UpstreamResponse,
  res: http.ServerResponse,
  call: StreamedCall,
  signal: AbortSignal,
): Promise<StreamOutcome> {
  const { body } = upstream;
  const splitter = createSseSplitter();
  const assembler = createStreamAssembler(call.toChat ? "chat" : call.kind);
  const { writer } = call;
  // Events whose text the client gets as is, not read yet. Those of the engine's last read wait until the result is
  // asked for, after the answer ended; those of earlier reads are read in a turn of their own once `catchUpEvents`
  // of them wait. A short answer (or one that arrives in one read) is thus read after its end; a long one on the way.
  // Left to the end, 2,000 events of ~0.3 KB each (tokens with logprobs) were held until then and read in one go,
  // 7-17 ms here, holding up every other call's chunks (bench/proxy/long-streams.ts, docs/benchmarks.md).
  const unread: string[] | undefined = writer || call.toChat ? undefined : [];
  /** How many of `unread` came before the engine's last read. */
  let earlier = 0;
  let catchingUp = false;
  const catchUp = () => {
    catchingUp = false;
    for (const data of unread?.splice(0, earlier) ?? []) read(data);
    earlier = 0;
  };
  let held = "";
  let engineError: string | undefined;
  res.writeHead(upstream.status, {
    "content-type": writer ? "text/event-stream" : (upstream.contentType ?? "text/event-stream"),
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
    "x-agl-span-id": call.spanId,
  });
  // The headers go out with the first events, in one write; alone only when the engine is slow to start streaming.
  let wrote = false;
  setImmediate(() => {
    if (!wrote && !res.writableEnded && !res.destroyed) res.flushHeaders();
  });
  // What one turn of the event loop forwards goes out in one write, at the end of the turn. An answer that arrives
  // whole (a short one, or a fast engine's) then reaches the client with its end, held `[DONE]` included, in one
  // write rather than two: `res.end` uncorks the connection. A stream of many turns is delayed by less than a turn.
  // The socket is corked, not `res`: on Node 22, `res.end()` after `res.cork()` leaves out what was held.
  const corkForTurn = corkUntil(setImmediate);
  const write = (text: string) => {
    if (res.socket) corkForTurn(res.socket, () => res.writableEnded);
    return res.write(text);
  };

  const take = (chunks: Record<string, unknown>[]) => {
    let out = "";
    for (const chunk of chunks) {
      assembler.add(chunk);
      if (writer) out += writer.chunk(chunk);
    }
    return out;
  };
  /** Reads one event's data: assembled, and what the client's API makes of it (`""` when the client gets it as is). */
  const read = (data: string): string => {
    try {
      const chunk = JSON.parse(data);
      if (chunk && typeof chunk === "object") {
        if (chunk.error) engineError ??= typeof chunk.error.message === "string" ? chunk.error.message : JSON.stringify(chunk.error);
        else return take(call.toChat ? call.toChat.push(chunk) : [chunk]);
      }
    } catch {
      // Not JSON: passed through untouched, nothing to assemble.
    }
    return "";
  };
  const forward = (events: ReturnType<typeof splitter.push>) => {
    let out = "";
    for (const event of events) {
      if (event.data === "[DONE]") {
        if (!writer) held += event.raw;
        continue;
      }
      if (!writer) out += event.raw;
      if ((!call.assemble && !writer) || event.data === "") continue;
      if (unread) unread.push(event.data);
      else out += read(event.data);
    }
    if (out === "") return;
    wrote = true;
    if (!write(out)) {
      body.pause();
      res.once("drain", () => body.resume());
    }
  };

  return new Promise((resolve) => {
    let done = false;
    const end = (broke: StreamResult["error"]) => {
      if (done) return;
      done = true;
      signal.removeEventListener("abort", onAbort);
      const rest = splitter.end();
      if (rest && !broke) forward([rest]);
      // A translated stream was read on the way: its error, if any, is known here.
      if (call.toChat && !broke && !engineError) {
        const tail = take(call.toChat.end());
        if (tail) write(tail);
      }
      let known: StreamResult | undefined;
      const result = (): StreamResult => {
        if (!known) {
          for (const data of unread?.splice(0) ?? []) read(data);
          const error = broke ?? (engineError ? { type: "engine_error", message: engineError } : undefined);
          known = { completion: assembler.result(), error };
        }
        return known;
      };
      if (writer) {
        const { completion, error } = result();
        held = error ? writer.fail(error.message) : writer.end(answerIds(completion));
      }
      resolve({
        result,
        release: () => {
          if (signal.aborted || res.writableEnded) return;
          if (broke && broke.type === "upstream_error" && !writer) {
            res.write(
              `data: ${JSON.stringify({ error: { message: broke.message, type: "upstream_error", code: "engine_broke_off" } })}\n\n`,
            );
          }
          res.end(held);
        },
      });
    };
    const onAbort = () => {
      body.destroy();
      end({ type: "client_disconnected", message: "the client closed the connection mid-stream" });
    };
    signal.addEventListener("abort", onAbort, { once: true });
    body.on("data", (chunk: Buffer) => {
      if (unread) earlier = unread.length;
      forward(splitter.push(chunk));
      // After this turn's write (its cork is released by an immediate queued before this one).
      if (earlier >= catchUpEvents && !catchingUp) {
        catchingUp = true;
        setImmediate(catchUp);
      }
    });
    body.on("end", () => end(undefined));
    body.on("error", (error) => end({ type: "upstream_error", message: `the engine's stream broke off: ${error.message}` }));
    body.on("close", () => {
      if (!body.readableEnded) end({ type: "upstream_error", message: "the engine closed the stream before its end" });
    });
    if (signal.aborted) onAbort();
  });
}

/** The ids a translated answer hands the client under `agl`, when the engine returned them. */
export function answerIds(c: CompletionRecord): AnswerIds | undefined {
  if (!c.promptIds && !c.responseIds) return undefined;
  return {
    ...(c.promptIds ? { prompt_token_ids: c.promptIds } : {}),
    ...(c.responseIds ? { token_ids: c.responseIds } : {}),
    ...(c.logprobs ? { logprobs: c.logprobs } : {}),
  };
}

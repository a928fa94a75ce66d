/** An incremental parser of server-sent events: feed it text as it arrives; it calls `onData` per complete event. */
export interface SseParser {
  feed(text: string): void;
  /** Flushes a last event not followed by a blank line. */
  end(): void;
}

/** Creates an SSE parser that hands each event's `data` (multi-line data joined with newlines) to `onData`. */
export function createSseParser(onData: (data: string) => void): SseParser {
  let buffer = "";
  let data: string[] = [];
  const dispatch = () => {
    if (data.length > 0) onData(data.join("\n"));
    data = [];
  };
  const line = (raw: string) => {
    const text = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (text === "") return dispatch();
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
  };
  return {
    feed(text) {
      buffer += text;
      let nl = buffer.indexOf("\n");
      while (nl >= 0) {
        line(buffer.slice(0, nl));
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
      }
    },
    end() {
      if (buffer) line(buffer);
      buffer = "";
      dispatch();
    },
  };
}

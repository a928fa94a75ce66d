/** Reads a whole server-sent-event response into the `data:` payloads of its events, in order. */
export async function readSse(res: Response): Promise<string[]> {
  const text = await res.text();
  return parseSse(text);
}

/** The `data:` payloads of an SSE document. */
export function parseSse(text: string): string[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== "")
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(line[5] === " " ? 6 : 5))
        .join("\n"),
    );
}

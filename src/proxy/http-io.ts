import type * as http from "node:http";

/** The request body exceeded the limit. */
export class BodyTooLargeError extends Error {
  override readonly name = "BodyTooLargeError";
}

/** Reads a request body up to `maxBytes`. */
export function readRequestBody(req: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners("data");
        req.resume();
        reject(new BodyTooLargeError(`the request body is larger than ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** Sends a JSON document. */
export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  if (res.headersSent) return void res.end();
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * Sends an error in the OpenAI shape (`{"error": {"message", "type", "code"}}`), so OpenAI clients raise it with
 * the message intact.
 */
export function sendError(
  res: http.ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: http.OutgoingHttpHeaders = {},
): void {
  const type = status === 429 ? "rate_limit_error" : status >= 500 ? "upstream_error" : "invalid_request_error";
  sendJson(res, status, { error: { message, type, code } }, headers);
}

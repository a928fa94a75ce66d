import type * as http from "node:http";
import { promisify } from "node:util";
import { gunzip, inflate } from "node:zlib";
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { encodeMessage } from "../encoding/generated-encoder.js";
import { writeSpans } from "../client/span-writer.js";
import { bearerTokenProblem, credentialsOf } from "../core/auth.js";
import type { Credentials } from "../core/credentials.js";
import { HTTP_ROUTE_SCOPES } from "../core/rpc-scopes.js";
import { decodeMessage } from "../encoding/generated-decoder.js";
import {
  type ExportTraceServiceRequest,
  ExportTraceServiceRequestSchema,
  ExportTraceServiceResponseSchema,
} from "../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { convertOtlpTraces } from "./otlp-convert.js";

/** A plain Node HTTP handler (the store server's `fallback` option). */
export type HttpHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Options of {@link createOtlpTracesHandler}. */
export interface OtlpTracesHandlerOptions {
  store: StoreApi;
  /** When set, requests need `authorization: Bearer <token>`, like the store's RPCs. */
  token?: string;
  /** Scoped tokens instead of `token`: requests need scope runner, trainer or admin. */
  credentials?: Credentials;
  /** Largest request body, compressed or not. Default 16 MiB. */
  maxBodyBytes?: number;
  /** Requests for other paths. Default: 404. */
  next?: HttpHandler;
  onError?: (error: unknown) => void;
}

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);
const maxSpansPerCall = 10_000;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** google.rpc.Status { code = 1; message = 2 } in protobuf, as OTLP/HTTP error bodies are. */
function rpcStatus(code: number, message: string): Buffer {
  const text = Buffer.from(message);
  const varint = (n: number) => {
    const out: number[] = [];
    for (let v = n; ; v >>>= 7) {
      if (v < 0x80) {
        out.push(v);
        return out;
      }
      out.push((v & 0x7f) | 0x80);
    }
  };
  return Buffer.from([0x08, ...varint(code), 0x12, ...varint(text.length), ...text]);
}

async function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new HttpError(413, `the request body exceeds ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks);
  const encoding = (req.headers["content-encoding"] ?? "identity").toLowerCase();
  try {
    if (encoding === "gzip") return await gunzipAsync(body, { maxOutputLength: limit });
    if (encoding === "deflate") return await inflateAsync(body, { maxOutputLength: limit });
  } catch (error) {
    throw new HttpError(400, `cannot decompress the ${encoding} body: ${(error as Error).message}`);
  }
  if (encoding !== "identity") throw new HttpError(415, `unsupported content-encoding "${encoding}"`);
  return body;
}

// OTLP/JSON writes trace and span ids as hex, where protobuf JSON expects base64.
function hexIdsToBase64(value: unknown, key?: string): unknown {
  if (typeof value === "string" && (key === "traceId" || key === "spanId" || key === "parentSpanId")) {
    return /^[0-9a-fA-F]*$/.test(value) ? Buffer.from(value, "hex").toString("base64") : value;
  }
  if (Array.isArray(value)) return value.map((v) => hexIdsToBase64(v));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hexIdsToBase64(v, k)]));
  }
  return value;
}

/**
 * Serves OTLP/HTTP trace export at `POST /v1/traces` (protobuf or JSON, optionally gzip or deflate): agents in any
 * language send spans with their standard OpenTelemetry exporter, naming their rollout and attempt in the resource or
 * span attributes `agentlightning.rollout_id` and `agentlightning.attempt_id`. Spans that cannot be placed are
 * reported as OTLP partial success. Spans are stored through `AddSpans` (idempotent: an exporter's retry stores
 * nothing twice).
 */
export function createOtlpTracesHandler(options: OtlpTracesHandlerOptions): HttpHandler {
  const limit = options.maxBodyBytes ?? 16 * 1024 * 1024;
  const credentials = credentialsOf(options);
  const next: HttpHandler =
    options.next ??
    ((_req, res) => {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: "not_found", message: "no such route" }));
    });

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse, json: boolean) => {
    if (req.method !== "POST") throw new HttpError(405, "use POST");
    const problem = credentials && bearerTokenProblem(req.headers.authorization, credentials, HTTP_ROUTE_SCOPES.otlp, "POST /v1/traces");
    if (problem) throw new HttpError(problem.status, problem.message);
    const body = await readBody(req, limit);
    let request: ExportTraceServiceRequest;
    try {
      request = json
        ? fromJson(ExportTraceServiceRequestSchema, hexIdsToBase64(JSON.parse(body.toString("utf8") || "{}")) as never, {
            ignoreUnknownFields: true,
          })
        : decodeMessage(ExportTraceServiceRequestSchema, body);
    } catch (error) {
      throw new HttpError(400, `cannot parse the OTLP traces payload: ${(error as Error).message}`);
    }
    const converted = convertOtlpTraces(request);
    let rejected = converted.rejected;
    const reasons = [...converted.reasons];
    for (const spans of converted.byAttempt.values()) {
      const { failed } = await writeSpans(options.store, spans, { maxPerCall: maxSpansPerCall });
      for (const { spans: refused, error } of failed) {
        rejected += refused.length;
        reasons.push(error.rawMessage);
      }
    }
    const response = create(ExportTraceServiceResponseSchema, {
      ...(rejected > 0 ? { partialSuccess: { rejectedSpans: BigInt(rejected), errorMessage: reasons.slice(0, 5).join("; ") } } : {}),
    });
    const payload = json
      ? Buffer.from(JSON.stringify(toJson(ExportTraceServiceResponseSchema, response)))
      : Buffer.from(encodeMessage(ExportTraceServiceResponseSchema, response));
    res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf", "content-length": payload.length });
    res.end(payload);
  };

  return (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/v1/traces") {
      if (path === "/v1/metrics" || path === "/v1/logs") {
        res.writeHead(501, { "content-type": "application/json" });
        res.end(JSON.stringify({ code: "unimplemented", message: "this store ingests traces only" }));
        return;
      }
      next(req, res);
      return;
    }
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
    const json = type === "application/json";
    const fail = (status: number, message: string) => {
      if (res.headersSent) return void res.destroy();
      const payload = json
        ? Buffer.from(JSON.stringify({ code: status, message }))
        : rpcStatus(status === 401 ? 16 : status === 403 ? 7 : 3, message);
      res.writeHead(status, { "content-type": json ? "application/json" : "application/x-protobuf", "content-length": payload.length });
      res.end(payload);
    };
    if (!json && type !== "application/x-protobuf") {
      req.resume();
      return fail(415, `unsupported content-type "${type}": send application/x-protobuf or application/json`);
    }
    handle(req, res, json).catch((error: unknown) => {
      if (error instanceof HttpError) return fail(error.status, error.message);
      options.onError?.(error);
      fail(500, "internal error");
    });
  };
}

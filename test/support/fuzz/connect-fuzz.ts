/**
 * Fuzzes a server's HTTP/1.1 side: Connect requests (POST /<service>/<method>) with JSON and binary bodies — random
 * messages, mutated ones, random JSON, damaged text — odd content types, timeouts and protocol versions, broken
 * stream envelopes for the server-streaming methods, and OTLP/HTTP trace exports to /v1/traces.
 */
import * as http from "node:http";
import { fromBinary, fromJson, toBinary, toJson, type DescMethod } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ExportTraceServiceRequestSchema } from "../../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import { acceptableCodes, type FuzzReport, fuzzedMethods, harvestIds, isSlowMethod, newReport, record, runCases } from "./fuzz-methods.js";
import type { FuzzOptions } from "./grpc-fuzz.js";
import { mutateBytes, mutateJson, mutateText, randomJson } from "./mutate.js";
import type { Prng } from "./prng.js";
import { createMessageGenerator } from "./random-message.js";

interface HttpCase {
  index: number;
  method: DescMethod | undefined;
  path: string;
  kind: string;
  httpMethod: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

interface HttpAnswer {
  status: number;
  contentType: string;
  body: Buffer;
  /** `grpc-status` (trailers, or headers of a trailers-only answer) of a gRPC or gRPC-Web answer. */
  grpcStatus?: string;
  /** A stream still open (headers received) when the client stopped waiting: a watch without a deadline. */
  open?: boolean;
  /** A transport failure: the connection dropped, or no answer came. */
  error?: string;
}

/** Connect's code names (`invalid_argument`) to codes. */
const codeByName = new Map(
  Object.values(Code)
    .filter((v): v is Code => typeof v === "number")
    .map((code) => [Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase(), code]),
);

const envelope = (flags: number, payload: Uint8Array, length = payload.length) => {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(length >>> 0, 1);
  return Buffer.concat([head, payload]);
};

function makeCase(index: number, rng: Prng, gen: ReturnType<typeof createMessageGenerator>): HttpCase {
  if (rng.chance(0.04)) {
    const json = rng.chance(0.5);
    const valid = gen.message(ExportTraceServiceRequestSchema);
    let body: Uint8Array;
    try {
      body = json
        ? new TextEncoder().encode(JSON.stringify(toJson(ExportTraceServiceRequestSchema, valid)))
        : toBinary(ExportTraceServiceRequestSchema, valid);
    } catch {
      body = rng.bytes(rng.int(0, 100));
    }
    if (rng.chance(0.6)) body = json ? mutateText(rng, new TextDecoder().decode(body)) : mutateBytes(rng, body);
    const headers = {
      "content-type": json ? "application/json" : rng.pick(["application/x-protobuf", "application/protobuf", "text/plain"]),
    };
    return { index, method: undefined, path: "/v1/traces", kind: `otlp-${json ? "json" : "proto"}`, httpMethod: "POST", headers, body };
  }
  const method = rng.pick(fuzzedMethods);
  const path = `/${method.parent.typeName}/${method.name}`;
  // Bidirectional streams are refused over HTTP/1.1, but still asked for the way a Connect stream is.
  const streaming = method.methodKind !== "unary";
  const useJson = rng.chance(0.6);
  const message = gen.message(method.input);
  let kind: string;
  let body: Uint8Array;
  if (useJson) {
    let json: unknown;
    try {
      json = toJson(method.input, message);
    } catch {
      json = randomJson(rng); // NaN in a google.protobuf.Value has no JSON form
    }
    const roll = rng.next();
    if (roll < 0.35) [kind, json] = ["json-valid", json];
    else if (roll < 0.7) [kind, json] = ["json-mutated", mutateJson(rng, json)];
    else [kind, json] = ["json-random", randomJson(rng)];
    body = new TextEncoder().encode(JSON.stringify(json) ?? "null");
    if (rng.chance(0.15)) [kind, body] = ["json-damaged", mutateText(rng, new TextDecoder().decode(body))];
  } else {
    const roll = rng.next();
    if (roll < 0.4) [kind, body] = ["proto-valid", toBinary(method.input, message)];
    else if (roll < 0.85) [kind, body] = ["proto-mutated", mutateBytes(rng, toBinary(method.input, message))];
    else [kind, body] = ["proto-random", rng.bytes(rng.int(0, 200))];
  }
  const codec = useJson ? "json" : "proto";
  // Long-polls and watches end at the deadline (deadline_exceeded is a fine answer); short, so a batch is quick.
  const timeoutMs = isSlowMethod(method) ? 300 : 2_000;
  let headers: Record<string, string> = {
    "content-type": streaming ? `application/connect+${codec}` : `application/${codec}`,
    "connect-protocol-version": "1",
    "connect-timeout-ms": String(timeoutMs),
  };
  // Now and then gRPC-Web or gRPC over HTTP/1.1 instead, which the same port serves.
  const grpcFlavour = rng.chance(0.12) ? rng.pick(["grpc-web", "grpc-web", "grpc"]) : undefined;
  if (grpcFlavour !== undefined) {
    headers = {
      "content-type": `application/${grpcFlavour}+${codec}`,
      "grpc-timeout": `${timeoutMs}m`,
      ...(grpcFlavour === "grpc" ? { te: "trailers" } : {}),
    };
    kind = `${grpcFlavour}:${kind}`;
  }
  if (streaming || grpcFlavour !== undefined) {
    const flags = rng.chance(0.85) ? 0 : rng.pick([1, 2, 3, 0x80, 0xff]);
    const length = rng.chance(0.9) ? body.length : rng.pick([0, body.length + 1, Math.max(0, body.length - 1), 2 ** 32 - 1]);
    body = envelope(flags, body, length);
    if (rng.chance(0.1)) body = Buffer.concat([body, envelope(0, body)]);
  }
  if (rng.chance(0.08)) {
    headers["content-type"] = rng.pick([
      "text/plain",
      "application/json; charset=utf-16",
      "application/x-www-form-urlencoded",
      "",
      "application/connect+json",
      "application/grpc",
      "application/grpc-web+proto",
      "application/proto",
    ]);
    if (headers["content-type"].startsWith("application/grpc")) headers["grpc-timeout"] = "300m";
    kind += "+content-type";
  }
  if (rng.chance(0.05)) {
    headers["connect-timeout-ms"] = rng.pick(["abc", "-1", "0", "99999999999", "1.5", "", "1".repeat(40)]);
    kind += "+timeout";
  }
  if (rng.chance(0.03)) {
    if (rng.chance(0.5)) delete headers["connect-protocol-version"];
    else headers["connect-protocol-version"] = "2";
    kind += "+version";
  }
  const httpMethod = rng.chance(0.03) ? rng.pick(["GET", "PUT", "DELETE", "PATCH"]) : "POST";
  return { index, method, path, kind, httpMethod, headers, body };
}

function send(url: string, c: HttpCase): Promise<HttpAnswer> {
  return new Promise((resolve) => {
    const req = http.request(`${url}${c.path}`, {
      method: c.httpMethod,
      headers: { ...c.headers, "content-length": String(c.body.length) },
      agent: false,
    });
    let started: http.IncomingMessage | undefined;
    const timer = setTimeout(() => {
      req.destroy();
      if (started?.statusCode === 200)
        resolve({ status: 200, contentType: String(started.headers["content-type"] ?? ""), body: Buffer.alloc(0), open: true });
      else resolve({ status: 0, contentType: "", body: Buffer.alloc(0), error: "no answer within 5 s" });
    }, 5_000);
    req.on("response", (res) => {
      started = res;
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        clearTimeout(timer);
        const grpcStatus = res.trailers["grpc-status"] ?? res.headers["grpc-status"];
        const answer = { status: res.statusCode ?? 0, contentType: String(res.headers["content-type"] ?? ""), body: Buffer.concat(chunks) };
        resolve(typeof grpcStatus === "string" ? { ...answer, grpcStatus } : answer);
      });
      res.on("error", (error) => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, contentType: "", body: Buffer.alloc(0), error: `response broke off: ${error.message}` });
      });
    });
    req.on("error", (error) => {
      clearTimeout(timer);
      resolve({ status: 0, contentType: "", body: Buffer.alloc(0), error: `connection failed: ${error.message}` });
    });
    req.end(c.body);
  });
}

/** The Connect error code in an error body, or undefined when the body is none. */
function errorCode(json: unknown): Code | "unnamed" | undefined {
  if (json === null || typeof json !== "object") return undefined;
  const name = (json as { code?: unknown }).code;
  if (typeof name !== "string") return undefined;
  return codeByName.get(name) ?? "unnamed";
}

/** The outcome of an answer, and why it is unacceptable (if it is). */
function assess(c: HttpCase, a: HttpAnswer, harvest: (value: unknown) => void): [outcome: string, problem?: string] {
  if (a.error) return ["dropped", a.error];
  if (a.open) return ["open-stream", c.method?.methodKind === "server_streaming" ? undefined : "a unary call that never ended"];
  if (c.method === undefined)
    return [`otlp-${a.status}`, a.status >= 500 ? `status ${a.status}: ${a.body.toString().slice(0, 200)}` : undefined];
  const json = a.contentType.includes("json");
  if (a.contentType.startsWith("application/grpc")) {
    // gRPC or gRPC-Web over HTTP/1.1 (a fuzzed content type): the status is in the trailers, which gRPC-Web sends
    // as the body's last frame (flag 0x80) unless the answer is trailers-only.
    let status = a.grpcStatus;
    for (let at = 0; status === undefined && at + 5 <= a.body.length; ) {
      const length = a.body.readUInt32BE(at + 1);
      if ((a.body.readUInt8(at) & 0x80) !== 0)
        status = /grpc-status:\s*(\d+)/i.exec(a.body.subarray(at + 5, at + 5 + length).toString())?.[1];
      at += 5 + length;
    }
    const code = Number(status ?? Number.NaN);
    if (a.status !== 200 || !Number.isInteger(code)) return [`grpc-http-${a.status}`, `no grpc-status (HTTP ${a.status})`];
    return [
      code === 0 ? "OK" : (Code[code] ?? `grpc-${code}`),
      code === 0 || acceptableCodes.has(code) ? undefined : `grpc-status ${Code[code]}`,
    ];
  }
  if (a.status !== 200) {
    let code: Code | "unnamed" | undefined;
    try {
      code = json ? errorCode(JSON.parse(a.body.toString())) : undefined;
    } catch {
      return [`http-${a.status}`, `status ${a.status} with a body that is not JSON: ${a.body.toString().slice(0, 200)}`];
    }
    if (code === undefined) return [`http-${a.status}`, a.status >= 500 ? `status ${a.status} without a Connect error` : undefined];
    if (code === "unnamed") return ["unnamed-code", `unknown error code in ${a.body.toString().slice(0, 200)}`];
    return [Code[code], acceptableCodes.has(code) ? undefined : `${Code[code]}: ${a.body.toString().slice(0, 300)}`];
  }
  try {
    // A Connect stream's answer (streaming content type) is enveloped, whatever the method.
    if (!a.contentType.startsWith("application/connect+")) {
      const output = json
        ? fromJson(c.method.output, JSON.parse(a.body.toString()), { ignoreUnknownFields: false })
        : fromBinary(c.method.output, a.body);
      harvest(output);
      return ["OK"];
    }
    // A stream: enveloped messages, the last one (flag 2) a JSON end-of-stream that may carry an error.
    for (let at = 0; at < a.body.length; ) {
      const flags = a.body.readUInt8(at);
      const length = a.body.readUInt32BE(at + 1);
      const payload = a.body.subarray(at + 5, at + 5 + length);
      at += 5 + length;
      if ((flags & 2) === 0) {
        harvest(json ? fromJson(c.method.output, JSON.parse(payload.toString())) : fromBinary(c.method.output, payload));
        continue;
      }
      const end = JSON.parse(payload.toString()) as { error?: unknown };
      if (end.error === undefined) return ["OK"];
      const code = errorCode(end.error);
      if (code === undefined || code === "unnamed") return ["unnamed-code", `end of stream: ${payload.toString().slice(0, 200)}`];
      return [Code[code], acceptableCodes.has(code) ? undefined : `end of stream: ${payload.toString().slice(0, 300)}`];
    }
    return ["truncated-stream", "the stream ended without its end-of-stream message"];
  } catch (error) {
    return ["undecodable", `the answer does not decode: ${String(error)}: ${a.body.toString("base64").slice(0, 200)}`];
  }
}

/** Runs up to `maxCases` cases (or `maxMs`); the report lists every unacceptable answer. */
export async function fuzzConnect(options: FuzzOptions): Promise<FuzzReport> {
  const { rng } = options;
  const report = newReport(rng.seed);
  const gen = createMessageGenerator(rng, options.ids);
  const harvest = (value: unknown) => harvestIds(value, options.ids, options.protectedIds);
  report.cases = await runCases(
    options,
    (index) => makeCase(index, rng, gen),
    (c) => isSlowMethod(c.method),
    (c) => send(options.url, c),
    (c, answer, harvesting) => {
      const [outcome, problem] = assess(c, answer, harvesting ? harvest : () => {});
      const label =
        `[connect seed=${report.seed} case=${c.index}] ${c.httpMethod} ${c.path} (${c.kind}) ` +
        `${JSON.stringify(c.headers)} input=${Buffer.from(c.body).toString("base64").slice(0, 300)}`;
      record(report, outcome, problem === undefined ? undefined : `${label}: ${problem}`);
    },
  );
  return report;
}

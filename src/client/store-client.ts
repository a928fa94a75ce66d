import { readFileSync } from "node:fs";
import type { DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { withRetries } from "../core/retry.js";
import type { ClientTls } from "../core/tls.js";
import { ResourceService } from "../gen/agl/v1/resources_pb.js";
import { LightningStore } from "../gen/agl/v1/store_pb.js";
import { withCallStream } from "./call-stream-transport.js";
import { createGrpcJsTransport, grpcChannelCredentials } from "./grpc-js-transport.js";
import { type PlainJsonClient, withTypedValues } from "./plain-json.js";
import { useNodeTextEncoding } from "../encoding/node-text-encoding.js";

export interface StoreClientOptions {
  /** `http://host:port` or `https://host:port` (default `http://127.0.0.1:4747`). */
  baseUrl?: string;
  /** Bearer token; defaults to the AGL_TOKEN environment variable. */
  token?: string;
  /** `grpc` through grpc-js (default, fastest), or connect-node's `connect` (JSON over HTTP/1.1) or `grpc-web`. */
  protocol?: "grpc" | "connect" | "grpc-web";
  /** Deadline of a call that sets none, beyond any server-side wait it asks for (default 30 s). */
  timeoutMs?: number;
  /** Tries of a call that is safe to repeat, when the server is unavailable (default 6: about 3 s of backoff). */
  maxTries?: number;
  /** PEM file of the certificate authority to trust for https (default: the system's). */
  caFile?: string;
  /** Mutual TLS: PEM files of this client's certificate chain and key. */
  certFile?: string;
  keyFile?: string;
  /** For https: the CA (instead of `caFile`) and a client certificate and key for mutual TLS, as PEM. */
  tls?: ClientTls;
  /**
   * `grpc` only: while calls are in progress the connection is pinged this often, and one whose ping goes unanswered
   * as long is closed and reopened, failing its calls with `UNAVAILABLE`. A cut network is then noticed within two
   * periods instead of when deadlines pass (or TCP gives up, minutes later). Default 10 s; 0 turns pings off.
   */
  keepaliveMs?: number;
  /**
   * `grpc` only: send unary calls as messages of one `CallStream` to the server (less CPU on either side than a call
   * of its own: docs/benchmarks.md; a server without it gets plain calls). Default true.
   */
  callStream?: boolean;
}

/**
 * A store client: the `StoreApi` over the network, plus `close()`. Where the contract holds a `google.protobuf.Value`
 * (a rollout's `input`, a JSON resource) a request may give plain JSON as well as the typed `Value`.
 */
export type StoreClient = PlainJsonClient<typeof LightningStore> & PlainJsonClient<typeof ResourceService> & { close(): void };

// Reads, span batches (idempotent by span id) and heartbeats can be repeated without changing the outcome.
const repeatable = new Set(["AddSpans", "UpdateWorker"]);
const isRepeatable = (method: DescMethod) =>
  method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS || repeatable.has(method.name);

/** Seconds a long-poll call may legitimately wait on the server, read from its request. */
function serverWaitSeconds(method: DescMethod, input: unknown): number {
  const request = input as { waitSeconds?: number; timeoutSeconds?: number };
  if (method.name === "DequeueRollouts") return request.waitSeconds ?? 0;
  if (method.name === "WaitForRollouts") return request.timeoutSeconds ?? Number.POSITIVE_INFINITY;
  return 0;
}

/** Wraps a transport with default deadlines (longer for long-polls), the token, and retries where safe. */
function withPolicy(
  inner: Transport,
  options: Required<Pick<StoreClientOptions, "timeoutMs" | "maxTries">> & { token?: string },
): Transport {
  const headersWithToken = (header: ConstructorParameters<typeof Headers>[0]) => {
    const headers = new Headers(header);
    if (options.token && !headers.has("authorization")) headers.set("authorization", `Bearer ${options.token}`);
    return headers;
  };
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const wait = serverWaitSeconds(method, input);
      const deadline = timeoutMs ?? (Number.isFinite(wait) ? options.timeoutMs + wait * 1000 : undefined);
      const tries = isRepeatable(method) ? options.maxTries : 1;
      const request = withTypedValues(method.input, input) as typeof input;
      return withRetries(() => inner.unary(method, signal, deadline, headersWithToken(header), request, contextValues), {
        tries,
        signal,
        retryable: (error) => ConnectError.from(error).code === Code.Unavailable,
      });
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      const request = (async function* () {
        for await (const message of input) yield withTypedValues(method.input, message) as typeof message;
      })();
      return inner.stream(method, signal, timeoutMs, headersWithToken(header), request, contextValues);
    },
  };
}

/**
 * Creates a typed client of the store server: `await client.enqueueRollouts({ rollouts: [{ input }] })`.
 * Calls have deadlines; reads, span batches and heartbeats are retried while the server is unavailable.
 */
export function createStoreClient(options: StoreClientOptions = {}): StoreClient {
  useNodeTextEncoding();
  const url = new URL(options.baseUrl ?? "http://127.0.0.1:4747");
  const protocol = options.protocol ?? "grpc";
  const tls: ClientTls | undefined = {
    ...options.tls,
    ...(options.caFile ? { ca: readFileSync(options.caFile) } : {}),
    ...(options.certFile ? { cert: readFileSync(options.certFile) } : {}),
    ...(options.keyFile ? { key: readFileSync(options.keyFile) } : {}),
  };
  let inner: Transport;
  let close = () => {};
  if (protocol === "grpc") {
    const keepaliveMs = options.keepaliveMs ?? 10_000;
    const transport = createGrpcJsTransport({
      address: url.host,
      credentials: grpcChannelCredentials(url, tls),
      ...(keepaliveMs > 0 ? { channelOptions: { "grpc.keepalive_time_ms": keepaliveMs, "grpc.keepalive_timeout_ms": keepaliveMs } } : {}),
    });
    if (options.callStream === false) {
      inner = transport;
      close = () => transport.close();
    } else {
      const streamed = withCallStream(transport);
      inner = streamed;
      close = () => {
        streamed.close();
        transport.close();
      };
    }
  } else {
    const base = {
      baseUrl: url.origin,
      httpVersion: "1.1" as const,
      nodeOptions: { ...tls },
    };
    inner = protocol === "connect" ? createConnectTransport({ ...base, useBinaryFormat: false }) : createGrpcWebTransport(base);
  }
  const transport = withPolicy(inner, {
    timeoutMs: options.timeoutMs ?? 30_000,
    maxTries: options.maxTries ?? 6,
    token: options.token ?? process.env.AGL_TOKEN,
  });
  // The transport turns plain JSON into typed values before sending, so the wider request types hold.
  const store = createClient(LightningStore, transport) as unknown as PlainJsonClient<typeof LightningStore>;
  const resources = createClient(ResourceService, transport) as unknown as PlainJsonClient<typeof ResourceService>;
  return { ...store, ...resources, close };
}

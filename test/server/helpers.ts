/**
 * Shared helpers of the server suites: a real store server on 127.0.0.1 (port 0), grpc-js clients built at run time
 * from proto/ with @grpc/proto-loader, and curl.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { startStoreServer, type StoreServer, type StoreServerOptions } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import type { WireJson } from "../support/wire-json.js";

export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

/** A dynamic grpc-js client: methods are looked up by name. */
export type GrpcClient = grpc.Client & Record<string, WireJson>;

export interface TestServer {
  store: Store;
  server: StoreServer;
  /** host:port for grpc-js clients. */
  address: string;
  close(): Promise<void>;
}

/** Starts a server over a fresh memory store; `store` in the options replaces the store the server sees. */
export async function startTestServer(options: Partial<StoreServerOptions> = {}): Promise<TestServer> {
  const store = createStore({ backend: createMemoryBackend() });
  const server = await startStoreServer({ port: 0, store, ...options });
  return {
    store,
    server,
    address: `127.0.0.1:${server.port}`,
    async close() {
      await server.close();
      await store.close();
    },
  };
}

let loaded: grpc.GrpcObject | undefined;

/** The packages of proto/ as grpc-js sees them (longs and enums as strings, defaults, virtual oneof fields). */
export function grpcPackages(): grpc.GrpcObject {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(
      [
        "agl/v1/store.proto",
        "agl/v1/resources.proto",
        "grpc/health/v1/health.proto",
        "grpc/reflection/v1/reflection.proto",
        "grpc/reflection/v1alpha/reflection.proto",
      ],
      { longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [`${repoRoot}/proto`] },
    ),
  );
  return loaded;
}

/** A grpc-js client of a service given by its full name, e.g. "agl.v1.LightningStore". */
export function grpcClient(
  typeName: string,
  address: string,
  credentials = grpc.credentials.createInsecure(),
  options: grpc.ClientOptions = {},
): GrpcClient {
  let node: unknown = grpcPackages();
  for (const part of typeName.split(".")) node = (node as Record<string, unknown>)[part];
  const Ctor = node as grpc.ServiceClientConstructor;
  return new Ctor(address, credentials, options) as GrpcClient;
}

/** Calls a unary method of a grpc-js client. */
export function unary<T = WireJson>(
  client: GrpcClient,
  method: string,
  request: object,
  metadata = new grpc.Metadata(),
  options: grpc.CallOptions = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    client[method].call(client, request, metadata, options, (error: grpc.ServiceError | null, response: T) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** Runs a unary call expected to fail and returns its error. */
export async function grpcError(call: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await call;
  } catch (error) {
    return error as grpc.ServiceError;
  }
  throw new Error("expected the call to fail");
}

export interface CurlResult {
  status: number;
  body: string;
}

/** Runs the real curl binary with `stdin` as its input; the status code comes from `-w`. */
export function curlWithInput(stdin: string, ...args: string[]): Promise<CurlResult> {
  return new Promise((resolve, reject) => {
    const child = execFile("curl", ["-sS", "-w", "\n%{http_code}", ...args], { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`curl failed: ${stderr || error.message}`));
      const cut = stdout.lastIndexOf("\n");
      resolve({ status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) });
    });
    child.stdin?.end(stdin);
  });
}

/** Runs the real curl binary; the status code comes from `-w`. */
export function curl(...args: string[]): Promise<CurlResult> {
  return curlWithInput("", ...args);
}

/** POSTs JSON with curl and parses the JSON answer. */
export async function curlJson(url: string, body: unknown, ...extra: string[]): Promise<{ status: number; json: WireJson }> {
  const input = typeof body === "string" ? body : JSON.stringify(body);
  const res = await curlWithInput(input, "-H", "content-type: application/json", "--data-binary", "@-", ...extra, url);
  return { status: res.status, json: res.body === "" ? undefined : JSON.parse(res.body) };
}

/** A google.protobuf.Value as proto-loader expects it. */
export function structValue(fields: Record<string, number | string>): object {
  return {
    structValue: {
      fields: Object.fromEntries(
        Object.entries(fields).map(([k, v]) => [k, typeof v === "number" ? { numberValue: v } : { stringValue: v }]),
      ),
    },
  };
}

/**
 * The store workload of bench/store against Agent Lightning v0.3's store server (`agl store`, in-memory, from the
 * venv `bench/vs-agl/setup.sh store` makes), over its HTTP API: the algorithm enqueues in batches
 * (`POST /v1/agl/queues/rollouts/enqueue`); each runner claims one rollout at a time (`POST …/dequeue`, limit 1, as
 * its runner does), sends the rollout's spans over OTLP/HTTP (`POST /v1/traces`, protobuf, the rollout and attempt
 * ids as resource attributes, the way its tracer exports them to a store server), then reports success
 * (`POST /v1/agl/rollouts/{id}/attempts/{attempt}`). Two span paths:
 * - `per-span`: one OTLP request per span, as its tracer's synchronous span processor sends them;
 * - `batch`: one OTLP request with all the rollout's spans (its best path).
 * The figures are measured after a warm-up, on the server process's CPU time (/proc) and peak RSS.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import * as http from "node:http";
import { createServer } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { ExportTraceServiceRequestSchema } from "../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import { processCpuSeconds } from "../stats.js";

export interface Agl03StoreOptions {
  venv: string;
  mode: "per-span" | "batch";
  runners: number;
  rollouts: number;
  warmup: number;
  spans: number;
  spanBytes: number;
  enqueueBatch?: number;
}

export interface StoreFigures {
  rolloutsPerSecond: number;
  /** Server CPU (user + system) per rollout, ms. */
  cpuMsPerRollout: number;
  peakRssMiB: number;
}

/** A free loopback port (the server binds it a moment later). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** User + system CPU seconds of a process so far, and its RSS in bytes (Linux /proc). */
export function processUsage(pid: number): { cpu: number; rss: number } {
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return { cpu: processCpuSeconds(pid), rss: Number(rss?.[1] ?? 0) * 1024 };
}

/** User + system CPU seconds of a process and all its descendants so far (Linux /proc). */
export function treeCpu(pid: number): number {
  let children: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
      if (text) children = children.concat(text.split(" ").map(Number));
    }
    return processUsage(pid).cpu + children.reduce((sum, child) => sum + treeCpu(child), 0);
  } catch {
    return 0; // gone meanwhile
  }
}

/** Polls `url` until it answers 200, or throws after `seconds`. */
export async function waitHealthy(url: string, child: ChildProcess, seconds = 120): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${url}: the server exited with ${child.exitCode}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} not healthy within ${seconds} s`);
}

/** Environment for the venv's Python: no network look-ups by LiteLLM at import. */
export const pythonEnv = { ...process.env, LITELLM_LOCAL_MODEL_COST_MAP: "True", PYTHONUNBUFFERED: "1" };

/** Runs the workload once against a fresh `agl store`; resolves to its figures. */
export async function runAgl03Store(options: Agl03StoreOptions): Promise<StoreFigures> {
  const port = await freePort();
  const child = spawn(`${options.venv}/bin/agl`, ["store", "--host", "127.0.0.1", "--port", String(port), "--log-level", "WARNING"], {
    env: pythonEnv,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const base = `http://127.0.0.1:${port}`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.runners + 1 });
  try {
    await waitHealthy(`${base}/v1/agl/health`, child);
    const post = (path: string, body: string | Uint8Array, type = "application/json") =>
      new Promise<Buffer>((resolve, reject) => {
        const req = http.request(
          `${base}${path}`,
          { method: "POST", agent, headers: { "content-type": type, "content-length": Buffer.byteLength(body) } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () =>
              (res.statusCode ?? 500) < 300
                ? resolve(Buffer.concat(chunks))
                : reject(new Error(`${path}: ${res.statusCode} ${Buffer.concat(chunks)}`)),
            );
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    const payload = randomBytes(Math.max(0, options.spanBytes - 200) / 2).toString("hex");
    const otlp = (rolloutId: string, attemptId: string, count: number) => {
      const now = BigInt(Date.now()) * 1_000_000n;
      const text = (key: string, value: string) => ({ key, value: { value: { case: "stringValue" as const, value } } });
      return toBinary(
        ExportTraceServiceRequestSchema,
        create(ExportTraceServiceRequestSchema, {
          resourceSpans: [
            {
              resource: { attributes: [text("agentlightning.rollout_id", rolloutId), text("agentlightning.attempt_id", attemptId)] },
              scopeSpans: [
                {
                  spans: Array.from({ length: count }, () => ({
                    traceId: randomBytes(16),
                    spanId: randomBytes(8),
                    name: "llm.call",
                    startTimeUnixNano: now,
                    endTimeUnixNano: now + 1000n,
                    attributes: [text("payload", payload)],
                  })),
                },
              ],
            },
          ],
        }),
      );
    };
    let done = 0;
    const runOne = async (rolloutId: string, attemptId: string) => {
      if (options.mode === "batch") await post("/v1/traces", otlp(rolloutId, attemptId, options.spans), "application/x-protobuf");
      else for (let i = 0; i < options.spans; i++) await post("/v1/traces", otlp(rolloutId, attemptId, 1), "application/x-protobuf");
      await post(`/v1/agl/rollouts/${rolloutId}/attempts/${attemptId}`, JSON.stringify({ status: "succeeded" }));
      done++;
    };
    const runner = async (index: number, total: number) => {
      while (done < total) {
        const claimed = JSON.parse(
          (await post("/v1/agl/queues/rollouts/dequeue", JSON.stringify({ limit: 1, worker_id: `bench-${index}` }))).toString(),
        ) as Array<{ rollout_id: string; attempt: { attempt_id: string } }>;
        if (claimed.length === 0) await new Promise((r) => setTimeout(r, 20));
        for (const r of claimed) await runOne(r.rollout_id, r.attempt.attempt_id);
      }
    };
    const enqueueBatch = options.enqueueBatch ?? 100;
    const phase = async (count: number) => {
      done = 0;
      const enqueue = async () => {
        for (let sent = 0; sent < count; sent += enqueueBatch) {
          const rollouts = Array.from({ length: Math.min(enqueueBatch, count - sent) }, (_, i) => ({ input: { task: sent + i } }));
          await post("/v1/agl/queues/rollouts/enqueue", JSON.stringify({ rollouts }));
        }
      };
      await Promise.all([enqueue(), ...Array.from({ length: options.runners }, (_, i) => runner(i, count))]);
    };
    if (options.warmup > 0) await phase(options.warmup);
    let peakRss = 0;
    const rssTimer = setInterval(() => {
      peakRss = Math.max(peakRss, processUsage(child.pid as number).rss);
    }, 100);
    const before = processUsage(child.pid as number).cpu;
    const started = performance.now();
    await phase(options.rollouts);
    const seconds = (performance.now() - started) / 1000;
    clearInterval(rssTimer);
    const cpu = processUsage(child.pid as number).cpu - before;
    return { rolloutsPerSecond: done / seconds, cpuMsPerRollout: (cpu / done) * 1000, peakRssMiB: peakRss / 2 ** 20 };
  } catch (error) {
    throw new Error(`agl03 store (${options.mode}): ${(error as Error).message}\n${stderr}`);
  } finally {
    agent.destroy();
    child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once("exit", r)));
  }
}

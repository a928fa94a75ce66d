import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { writeSelfSignedCert } from "../support/self-signed-cert.js";
import { curl, curlJson, grpcClient, grpcError, repoRoot, unary } from "./helpers.js";

const LINE = /^agl store listening on (https?):\/\/127\.0\.0\.1:(\d+) \(backend: (memory|sqlite)(, tls)?\)$/;

interface Cli {
  child: ChildProcessWithoutNullStreams;
  line: string;
  port: number;
  stdout: () => string;
  exited: Promise<{ code: number | null; stderr: string }>;
}

const started: Cli[] = [];

/** Spawns `node bin/agl.js ...args` and waits for its one line on stdout. */
async function startCli(...args: string[]): Promise<Cli> {
  const child = spawn(process.execPath, ["bin/agl.js", ...args], { cwd: repoRoot, env: { ...process.env, AGL_TOKEN: "" } });
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (stdout.includes("\n")) resolve(stdout.split("\n")[0]!);
    });
    void exited.then(({ code }) => reject(new Error(`agl exited with ${code}: ${stderr}`)));
  });
  const cli = { child, line, port: Number(LINE.exec(line)?.[2]), stdout: () => stdout, exited };
  started.push(cli);
  return cli;
}

/** Runs `node bin/agl.js ...args` to completion. */
function runCli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["bin/agl.js", ...args], { cwd: repoRoot });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("agl serve", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "agl-cli-"));
  });
  afterEach(() => {
    for (const cli of started.splice(0)) if (cli.child.exitCode === null) cli.child.kill("SIGKILL");
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("--memory --port 0 prints one line, serves, and exits 0 on SIGTERM", async () => {
    const cli = await startCli("serve", "--memory", "--port", "0");
    expect(cli.line).toMatch(LINE);
    expect(LINE.exec(cli.line)?.[3]).toBe("memory");
    expect((await curl(`http://127.0.0.1:${cli.port}/healthz`)).status).toBe(200);
    const store = grpcClient("agl.v1.LightningStore", `127.0.0.1:${cli.port}`);
    expect((await unary(store, "getStatistics", {})).backend).toBe("memory");

    // A long-poll in flight must not hold the shutdown up: it ends with UNAVAILABLE and the process exits 0.
    const poll = grpcError(unary(store, "dequeueRollouts", { workerId: "w", waitSeconds: 60 }));
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    cli.child.kill("SIGTERM");
    const { code } = await cli.exited;
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect((await poll).code).toBe(grpc.status.UNAVAILABLE);
    expect(cli.stdout()).toBe(`${cli.line}\n`);
    store.close();
  });

  it("--unresponsive-seconds and --worker-gone-seconds set the watchdog's limits", async () => {
    const cli = await startCli("serve", "--memory", "--port", "0", "--unresponsive-seconds", "1", "--worker-gone-seconds", "1.5");
    const store = grpcClient("agl.v1.LightningStore", `127.0.0.1:${cli.port}`);
    // An attempt of no worker that never heartbeats, and a worker that heartbeats once and goes silent.
    const silent = await unary(store, "startRollout", { rollout: {} });
    await unary(store, "updateWorker", { workerId: "w-gone" });
    await new Promise((r) => setTimeout(r, 3_000)); // 30 s by default: neither would be noticed yet
    const attempts = await unary(store, "queryAttempts", { rolloutId: silent.rolloutId });
    expect(attempts.attempts[0].status).toBe("ATTEMPT_STATUS_UNRESPONSIVE");
    expect((await unary(store, "getWorker", { workerId: "w-gone" })).status).toBe("WORKER_STATUS_UNKNOWN");
    store.close();

    const bad = await runCli("serve", "--memory", "--worker-gone-seconds", "soon");
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--worker-gone-seconds needs a number of seconds ≥ 0, got "soon"')]);
  });

  it("keeps data in a SQLite file across restarts", async () => {
    const db = join(dir, "agl.db");
    const first = await startCli("serve", "--database", db, "--port", "0");
    expect(LINE.exec(first.line)?.[3]).toBe("sqlite");
    const enqueued = await curlJson(`http://127.0.0.1:${first.port}/agl.v1.LightningStore/EnqueueRollouts`, {
      rollouts: [{ groupId: "kept" }],
    });
    const rolloutId = enqueued.json.rollouts[0].rolloutId;
    first.child.kill("SIGINT");
    expect((await first.exited).code).toBe(0);

    const second = await startCli("serve", "--database", db, "--port", "0");
    const got = await curlJson(`http://127.0.0.1:${second.port}/agl.v1.LightningStore/GetRollout`, { rolloutId });
    expect(got.json.groupId).toBe("kept");
    second.child.kill("SIGTERM");
    expect((await second.exited).code).toBe(0);
  });

  it("serves TLS with --tls-cert and --tls-key and requires --token when given", async () => {
    writeSelfSignedCert(dir, "IP:127.0.0.1");
    const cli = await startCli(
      "serve",
      "--memory",
      "--port",
      "0",
      "--token",
      "t0k",
      "--tls-cert",
      join(dir, "cert.pem"),
      "--tls-key",
      join(dir, "key.pem"),
    );
    expect(LINE.exec(cli.line)?.slice(1)).toEqual(["https", String(cli.port), "memory", ", tls"]);
    const url = `https://127.0.0.1:${cli.port}/agl.v1.LightningStore/GetStatistics`;
    expect((await curlJson(url, {}, "--cacert", join(dir, "cert.pem"))).status).toBe(401);
    expect((await curlJson(url, {}, "--cacert", join(dir, "cert.pem"), "-H", "authorization: Bearer t0k")).status).toBe(200);
    cli.child.kill("SIGTERM");
    expect((await cli.exited).code).toBe(0);
  });

  it("serves the dashboard at / from --ui-dir, next to OTLP and the RPCs; --no-ui turns it off", async () => {
    const ui = join(dir, "ui");
    mkdirSync(ui, { recursive: true });
    writeFileSync(join(ui, "index.html"), "<!doctype html><title>agl</title>\n");
    const on = await startCli("serve", "--memory", "--port", "0", "--ui-dir", ui);
    const page = await curl("-i", `http://127.0.0.1:${on.port}/rollouts`);
    expect(page.status).toBe(200);
    expect(page.body).toContain("<title>agl</title>");
    expect(page.body.toLowerCase()).toContain("content-security-policy: default-src 'none'; script-src 'self'");
    // OTLP keeps its route: an empty export is accepted.
    const otlp = await curl("-X", "POST", "-H", "content-type: application/json", "--data", "{}", `http://127.0.0.1:${on.port}/v1/traces`);
    expect(otlp.status).toBe(200);
    on.child.kill("SIGTERM");
    expect((await on.exited).code).toBe(0);

    const off = await startCli("serve", "--memory", "--port", "0", "--no-ui");
    const none = await curl(`http://127.0.0.1:${off.port}/`);
    expect([none.status, none.body]).toEqual([404, JSON.stringify({ code: "not_found", message: "no such route" })]);
    off.child.kill("SIGTERM");
    expect((await off.exited).code).toBe(0);
    const both = await runCli("serve", "--memory", "--no-ui", "--ui-dir", ui);
    expect([both.code, both.stderr]).toEqual([2, expect.stringContaining("--no-ui and --ui-dir exclude each other")]);
  });

  it("rejects unknown flags and bad values with exit code 2", async () => {
    const unknown = await runCli("serve", "--memroy");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--memroy/);
    const badPort = await runCli("serve", "--memory", "--port", "http");
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toMatch(/--port/);
    const halfTls = await runCli("serve", "--memory", "--tls-cert", "x.pem");
    expect(halfTls.code).toBe(2);
    const help = await runCli("serve", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--database <path\|url>/);
  });
});

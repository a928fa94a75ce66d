/**
 * The package as a user gets it: a fresh build packed by `npm pack`, installed from the tarball into a project of its
 * own, and a consumer (test/fixtures/pack-consumer) type-checked with this repo's TypeScript under NodeNext — so only
 * what package.json "exports" names resolves — then run with node against a real store, proxy and engine.
 *
 * The install unpacks the tarball into node_modules/agl, as npm lays it out, and links the package's declared
 * dependencies (and the optional framework peers, which a user installs) from this checkout's node_modules: no
 * network, and a dependency the package forgot to declare is missing, as it would be for a user.
 *
 * It also pins the public API: the names every entry point exports (values and types), and the root's size.
 */
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

/** Every entry point of package.json "exports" but the generated code, with what it exports. */
const api: Record<string, { values: string[]; types: string[] }> = {
  agl: {
    values: [
      "rollout",
      "promptTemplate",
      "emitReward",
      "emitMessage",
      "emitObject",
      "emitException",
      "emitAnnotation",
      "linkAttributes",
      "tagAttributes",
      "createTracingFetch",
      "aglTracer",
      "createRunner",
      "createInProcessExecutor",
      "createPoolExecutor",
      "Trainer",
      "createBaseline",
      "createStoreClient",
      "AglError",
    ],
    types: [
      "Agent",
      "RolloutContext",
      "RolloutFn",
      "RolloutResult",
      "Resources",
      "LlmResource",
      "PromptTemplateResource",
      "EmitRewardOptions",
      "EmitOptions",
      "TracingFetchOptions",
      "Runner",
      "RunnerOptions",
      "InProcessExecutorOptions",
      "PoolExecutorOptions",
      "TrainerOptions",
      "AgentSource",
      "Algorithm",
      "AlgorithmContext",
      "Datasets",
      "BaselineOptions",
      "BaselineReport",
      "StoreClient",
      "StoreClientOptions",
      "StoreApi",
      "AglErrorCode",
      "Logger",
    ],
  },
  "agl/store": {
    values: ["createStore", "createMemoryBackend", "createSqliteBackend", "createPostgresBackend"],
    types: [
      "Store",
      "StoreOptions",
      "StoreLimits",
      "PendingWrites",
      "StoreApi",
      "StoreCallOptions",
      "SqliteBackendOptions",
      "PostgresBackendOptions",
      "StorageBackend",
      "StoreEvent",
    ],
  },
  "agl/server": {
    values: ["startStoreServer", "createOtlpTracesHandler", "createUiHandler"],
    types: ["StoreServer", "StoreServerOptions", "ServerLogger", "OtlpTracesHandlerOptions", "UiHandlerOptions"],
  },
  "agl/proxy": {
    values: ["createLlmProxy", "proxyBaseUrl", "bindResource", "bindResources"],
    types: ["LlmProxy", "LlmProxyOptions", "ProxyStatus", "Backend", "PauseOptions", "PauseMode"],
  },
  "agl/adapter": {
    values: [
      "spansToTriplets",
      "createTripletAdapter",
      "spansToMessages",
      "buildTraceTree",
      "repairHierarchy",
      "findLlmCalls",
      "defaultRecognizers",
      "recognizeLlmCall",
      "agentNameOf",
      "rewardOf",
      "matchRewards",
      "semconv",
    ],
    types: [
      "TripletAdapter",
      "TripletAdapterOptions",
      "TripletRollout",
      "AdaptedSpans",
      "MismatchKind",
      "MessagesView",
      "CallConversation",
      "ChatMessage",
      "TraceTree",
      "TraceNode",
      "LlmCall",
      "FindLlmCallsOptions",
      "LlmCallRecognizer",
      "RewardMatchPolicy",
    ],
  },
  "agl/triplets": {
    values: ["createTripletClient", "streamTriplets", "TripletMode", "RewardMatch"],
    types: [
      "TripletClient",
      "TripletClientOptions",
      "StreamTripletsOptions",
      "Triplet",
      "TripletStats",
      "TripletOptions",
      "RolloutTriplets",
      "StreamTripletsResponse",
    ],
  },
  "agl/apo": {
    values: [
      "createApo",
      "runApo",
      "formatApoReport",
      "defaultApoPrompts",
      "roundCost",
      "budgetWarning",
      "createOptimizerClient",
      "createStoreEvaluator",
    ],
    types: [
      "ApoAlgorithmOptions",
      "ApoOptions",
      "OptimizerOptions",
      "ApoEvent",
      "ApoReport",
      "ApoStatus",
      "RoundReport",
      "ApoPrompts",
      "PromptVariant",
      "ApoBudget",
      "BudgetUsage",
      "RoundCost",
      "SearchShape",
      "OptimizerClient",
      "OptimizerClientOptions",
      "OptimizerRequest",
      "OptimizerAnswer",
      "OptimizerMessage",
      "RolloutEvaluator",
      "EvaluationRequest",
      "StoreEvaluatorOptions",
      "RolloutOutcome",
      "OutcomeStatus",
      "ExperimentsFormat",
    ],
  },
  "agl/openai-agents": { values: ["createAgentsTraceProcessor", "registerOpenAIAgentsTracing"], types: ["RegisterAgentsTracingOptions"] },
  "agl/ai-sdk": { values: ["createAiSdkIntegration", "registerAiSdkTracing"], types: [] },
  "agl/langchain": { values: ["AglLangChainHandler", "registerLangChainTracing"], types: [] },
};

/** The root is for agent authors and trainers; everything else has its own entry point. */
const ROOT_LIMIT = 45;

const repo = fileURLToPath(new URL("../../", import.meta.url));
const repoModules = join(repo, "node_modules");
const tsc = join(repoModules, "typescript", "bin", "tsc");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end without blocking this process (the engine the consumer calls lives here). */
function run(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { ...options, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr: stderr || (error?.message ?? "") });
    });
  });
}

/** `run`, failing with the command's output when it fails. */
async function runOk(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  const result = await run(file, args, options);
  if (result.code !== 0) throw new Error(`${[file, ...args].join(" ")} exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** The names an entry's declaration file exports; only re-export lists and `export * as` are expected there. */
function exportedNames(declarations: string): string[] {
  const code = declarations.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  const names: string[] = [];
  for (const [, list] of code.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s*from/g)) {
    for (const item of list!.split(",")) {
      const name = item
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)
        .at(-1)!;
      if (name) names.push(name);
    }
  }
  for (const [, name] of code.matchAll(/export\s*\*\s*as\s+(\w+)\s+from/g)) names.push(name!);
  const other = code.match(/^\s*export\s+(?!(?:type\s+)?\{|\*\s*as\s)/m);
  if (other) throw new Error(`unexpected export form in an entry point: ${other[0]}`);
  return names.sort();
}

/** The "exports" key of an entry point: "." for the root, "./store" for `agl/store`. */
const subpath = (entry: string) => (entry === "agl" ? "." : `./${entry.slice("agl/".length)}`);

interface PackageJson {
  exports: Record<string, { types: string; import: string }>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  files: string[];
}

let work: string;
let engine: FakeLlmServer;
let schema: string;
let packedFiles: string[];
let consumer: string;
let installed: string;
let published: PackageJson;
let compiled: Run;

/** Packs what package.json "files" names, with dist/ built fresh from src/ (the checkout's dist/ is left alone). */
async function pack(): Promise<string> {
  const manifest = JSON.parse(await readFile(join(repo, "package.json"), "utf8")) as PackageJson;
  const stage = join(work, "stage");
  await mkdir(stage);
  await cp(join(repo, "package.json"), join(stage, "package.json"));
  await cp(join(repo, "README.md"), join(stage, "README.md"));
  for (const path of manifest.files.filter((p) => p !== "dist")) await cp(join(repo, path), join(stage, path), { recursive: true });
  await runOk(process.execPath, [tsc, "-p", join(repo, "tsconfig.build.json"), "--outDir", join(stage, "dist")], { cwd: repo });
  const [packed] = JSON.parse(await runOk("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", work], { cwd: stage })) as {
    filename: string;
    files: { path: string }[];
  }[];
  packedFiles = packed!.files.map((f) => f.path);
  return join(work, packed!.filename);
}

/** Installs the tarball into node_modules/agl; its dependencies, and the framework peers, linked from this checkout. */
async function install(tarball: string): Promise<void> {
  consumer = join(work, "consumer");
  installed = join(consumer, "node_modules", "agl");
  await mkdir(installed, { recursive: true });
  await runOk("tar", ["-xzf", tarball, "-C", installed, "--strip-components=1"], { cwd: work });
  published = JSON.parse(await readFile(join(installed, "package.json"), "utf8")) as PackageJson;
  for (const name of [...Object.keys(published.dependencies), ...Object.keys(published.peerDependencies), "@types/node"]) {
    await mkdir(dirname(join(consumer, "node_modules", name)), { recursive: true });
    await symlink(join(repoModules, name), join(consumer, "node_modules", name), "dir");
  }
}

/** The consumer project: the fixture, plus a file per entry point that imports every pinned name; compiled to out/. */
async function writeConsumer(): Promise<void> {
  for (const file of ["main.ts", "agent.ts", "dev-driver.ts", "dev-agent.ts"])
    await cp(fileURLToPath(new URL(`../fixtures/pack-consumer/${file}`, import.meta.url)), join(consumer, file));
  for (const [index, [entry, { values, types }]] of Object.entries(api).entries()) {
    const imports = [
      ...(values.length ? [`import { ${values.join(", ")} } from "${entry}";`] : []),
      ...(types.length ? [`import type { ${types.join(", ")} } from "${entry}";`] : []),
    ];
    await writeFile(join(consumer, `exports-${index}.ts`), `${imports.join("\n")}\n`);
  }
  await writeFile(join(consumer, "package.json"), JSON.stringify({ name: "agl-consumer", private: true, type: "module" }));
  await writeFile(
    join(consumer, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2023",
        lib: ["ES2023"],
        module: "NodeNext",
        moduleResolution: "NodeNext",
        types: ["node"],
        strict: true,
        // Third-party declarations refer to DOM types a Node project does not load; agl's own are checked by use.
        skipLibCheck: true,
        rootDir: ".",
        outDir: "out",
      },
      include: ["*.ts"],
    }),
  );
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "agl-pack-"));
  engine = await startFakeLlmServer({
    policy: (input) => {
      const content = input.messages.at(-1)?.content;
      return { content: `echo: ${typeof content === "string" ? content : JSON.stringify(content)}` };
    },
  });
  schema = freshSchema();
  await install(await pack());
  await writeConsumer();
  compiled = await run(process.execPath, [tsc, "-p", consumer], { cwd: consumer });
}, 180_000);

afterAll(async () => {
  await engine?.close();
  if (schema) await dropSchema(schema).catch(() => {});
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("holds the build, the command line, the protos and the manifest only", () => {
    expect(packedFiles.filter((p) => !/^(dist|bin|proto)\/|^(package\.json|README\.md)$/.test(p))).toEqual([]);
    expect(packedFiles).toContain("dist/store.js");
  });

  it("declares exactly the pinned exports in every entry point, and at most 45 in the root", async () => {
    expect(Object.keys(published.exports).sort()).toEqual([...Object.keys(api).map(subpath), "./gen/*.js"].sort());
    for (const [entry, { values, types }] of Object.entries(api)) {
      const declarations = await readFile(join(installed, published.exports[subpath(entry)]!.types), "utf8");
      expect(exportedNames(declarations), entry).toEqual([...values, ...types].sort());
    }
    const root = api.agl!;
    expect(root.values.length + root.types.length).toBeLessThanOrEqual(ROOT_LIMIT);
  });

  it('type-checks a consumer of every export under NodeNext, where only package.json "exports" resolve', () => {
    expect(compiled.code, `${compiled.stdout}\n${compiled.stderr}`).toBe(0);
  });

  it("runs its command line from dist/ (an installed package has no src/)", async () => {
    const cli = await run(process.execPath, [join(installed, "bin", "agl.js"), "serve", "--help"], { cwd: consumer });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain("Usage: agl serve");
  });

  it("runs Trainer.dev on a .ts agent that emits its reward, from a driver run by the tsx CLI", async () => {
    const tsx = join(consumer, "node_modules", "tsx", "dist", "cli.mjs");
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, AGL_LOG_LEVEL: "error" };
    const stdout = await runOk(process.execPath, [tsx, "dev-driver.ts"], { cwd: consumer, env });
    const report = JSON.parse(stdout) as { rollouts: { status: string; reward?: number }[]; meanReward: { train?: number } };
    expect(report.rollouts.map((r) => [r.status, r.reward])).toEqual([
      ["succeeded", 1],
      ["succeeded", 0.5],
    ]);
    expect(report.meanReward.train).toBe(0.75);
  }, 60_000);

  it("runs the consumer: every backend, a served store with the proxy, runners on worker threads, triplets back", async () => {
    // A clean environment: what the consumer sees comes back as JSON on stdout.
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      AGL_LOG_LEVEL: "error",
      AGL_PACK_ENGINE_URL: engine.url,
      AGL_PACK_ENGINE_MODEL: engine.model,
      AGL_PACK_POSTGRES_URL: postgresUrl(),
      AGL_PACK_POSTGRES_SCHEMA: schema,
    };
    const seen = JSON.parse(await runOk(process.execPath, [join(consumer, "out", "main.js")], { cwd: consumer, env }));

    for (const [entry, { values }] of Object.entries(api)) expect(seen.valueExports[entry], entry).toEqual([...values].sort());
    expect(seen.backends).toEqual({ memory: 1, sqlite: 1, postgres: 1 });
    // Three rollouts, each one call through the proxy to the engine, echoed and rewarded.
    expect(seen.rollouts.map((r: { status: string; reward: number }) => [r.status, r.reward])).toEqual([
      ["succeeded", 1],
      ["succeeded", 1],
      ["succeeded", 1],
    ]);
    expect(engine.answers).toHaveLength(3);
    expect(seen.proxyRequests).toBe(3);
    // The TripletService and the adapter in process give each rollout one triplet with the engine's exact ids.
    const engineIds = engine.answers.map((a) => a.responseIds).sort();
    const byRollout = (rows: { rolloutId: string; finalReward: number; responses: number[][] }[]) =>
      Object.fromEntries(rows.map((r) => [r.rolloutId, { finalReward: r.finalReward, responses: r.responses }]));
    expect(seen.streamed.flatMap((r: { responses: number[][] }) => r.responses).sort()).toEqual(engineIds);
    expect(byRollout(seen.adapted)).toEqual(byRollout(seen.streamed));
    expect(Object.keys(byRollout(seen.streamed)).sort()).toEqual(seen.rollouts.map((r: { rolloutId: string }) => r.rolloutId).sort());
    for (const r of seen.adapted) expect([r.finalReward, r.conversations, r.feedback]).toEqual([1, 1, ["echoed"]]);
    // B=2, F=2, G=3, V=4, N=10 in round 1: 2·B·F calls; B·F·G + (1 + B·F)·V + N rollouts.
    expect(seen.apoRoundCost).toEqual({ optimizerCalls: 8, rollouts: 42 });
    expect(seen.apoError).toBe(true);
    expect(seen.hooks).toEqual(["function", "function", "function"]);
    expect(seen.succeeded).toBe("SUCCEEDED");
  }, 120_000);
});

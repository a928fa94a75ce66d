/** The agent API: functional and class agents, modes, loading by path, typed resources and the proxy URL. */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { rollout, rolloutMethodFor } from "../../src/agent/agent.js";
import { AglError } from "../../src/core/errors.js";
import { loadAgent } from "../../src/agent/load-agent.js";
import { bindProxyEndpoint } from "../../src/agent/proxy-url.js";
import { resolveResources } from "../../src/agent/resources.js";
import { ResourceSchema, TemplateEngine } from "../../src/gen/agl/v1/types_pb.js";
import { jsonValue } from "../support/store-harness.js";

const fixture = (name: string) => new URL(`../fixtures/${name}`, import.meta.url).pathname;
const resources = {
  main: create(ResourceSchema, {
    kind: {
      case: "llm",
      value: { endpoint: "https://api.example/v1", model: "gpt-x", apiKey: "k", samplingParameters: { temperature: 0.2 } },
    },
  }),
  policy: create(ResourceSchema, { kind: { case: "proxyLlm", value: { endpoint: "http://proxy:4747/v1/", model: "policy" } } }),
  greeting: create(ResourceSchema, {
    kind: { case: "promptTemplate", value: { template: "Hi {name}, {n:.1f}", engine: TemplateEngine.F_STRING } },
  }),
  system: create(ResourceSchema, {
    kind: { case: "promptTemplate", value: { template: "{% for t in tools %}[{{ t }}]{% endfor %}", engine: TemplateEngine.JINJA } },
  }),
  config: create(ResourceSchema, { kind: { case: "json", value: jsonValue({ retries: 3, tags: ["a"] }) } }),
};

describe("agents", () => {
  it("rollout(fn) makes an agent named after the function, and modes pick the matching method", async () => {
    const agent = rollout(async function solve() {
      return 1;
    });
    expect(agent.name).toBe("solve");
    const ctx = {} as never;
    const classAgent = {
      rollout: () => "plain",
      trainingRollout: () => "train",
      validationRollout: () => "val",
    };
    expect(rolloutMethodFor(classAgent as never, "train")(null, ctx, ctx)).toBe("train");
    expect(rolloutMethodFor(classAgent as never, "val")(null, ctx, ctx)).toBe("val");
    expect(rolloutMethodFor(classAgent as never, "test")(null, ctx, ctx)).toBe("val");
    expect(rolloutMethodFor(classAgent as never, undefined)(null, ctx, ctx)).toBe("plain");
    // Without special methods every mode uses rollout().
    expect(rolloutMethodFor(agent, "train")).toBeTypeOf("function");
    expect(() => rollout(42 as never)).toThrow(TypeError);
  });

  it("loads agents by path: a default class export, a named export, and clear errors otherwise", async () => {
    const fromClass = await loadAgent(fixture("agents.ts"));
    expect(fromClass.name).toBe("mode-agent");
    expect(await fromClass.trainingRollout?.(null, {} as never, {} as never)).toBe(1);
    const named = await loadAgent(fixture("agents.ts"), "sleeper");
    expect(named.name).toBeTypeOf("string");
    await expect(loadAgent(fixture("not-an-agent.ts"))).rejects.toThrow(/exports no agent/);
    await expect(loadAgent(fixture("agents.ts"), "missing")).rejects.toThrow(/no agent named "missing"/);
    await expect(loadAgent(fixture("broken-agent.ts"))).rejects.toMatchObject({
      code: "agent_load",
      message: expect.stringMatching(/fails to load/),
    });
  });
});

describe("resources", () => {
  const typed = resolveResources({ resourcesId: "rs-000000000001", version: 2, resources }, "ro-abc", "at-def");

  it("binds a proxy LLM to the attempt and keeps a plain LLM as published", () => {
    expect(typed.llm("policy")).toMatchObject({
      kind: "llm",
      endpoint: "http://proxy:4747/rollout/ro-abc/attempt/at-def/v1",
      model: "policy",
      proxied: true,
    });
    expect(typed.llm("main")).toMatchObject({
      endpoint: "https://api.example/v1",
      model: "gpt-x",
      apiKey: "k",
      proxied: false,
      samplingParameters: { temperature: 0.2 },
    });
    // With no name, the attempt-bound proxy is the default.
    expect(typed.llm()).toBe(typed.llm("policy"));
    expect(typed.json("config")).toEqual({ retries: 3, tags: ["a"] });
    expect([typed.resourcesId, typed.version, typed.names]).toEqual([
      "rs-000000000001",
      2,
      ["main", "policy", "greeting", "system", "config"],
    ]);
  });

  it("gives a proxy LLM without a key the runner's proxy key, and leaves named keys and plain LLMs alone", () => {
    const data = { resourcesId: "rs-1", version: 1, resources };
    const withKey = resolveResources(data, "ro-1", "at-1", "store-token");
    expect(withKey.llm("policy").apiKey).toBe("store-token");
    expect(withKey.llm("main").apiKey).toBe("k");
    const plain = {
      resourcesId: "rs-1",
      version: 1,
      resources: { bare: create(ResourceSchema, { kind: { case: "llm", value: { endpoint: "http://e/v1", model: "m" } } }) },
    };
    expect(resolveResources(plain, "ro-1", "at-1", "store-token").llm("bare").apiKey).toBeUndefined();
    expect(resolveResources(data, "ro-1", "at-1").llm("policy").apiKey).toBeUndefined();
  });

  it("renders f-string and Jinja templates", () => {
    expect(typed.promptTemplate().format({ name: "Ada", n: 2 })).toBe("Hi Ada, 2.0");
    expect(typed.promptTemplate("system").format({ tools: ["add", "mul"] })).toBe("[add][mul]");
  });

  it("says which resource is missing and what there is", () => {
    const empty = resolveResources({ resourcesId: "", version: 0, resources: {} }, "ro-1", "at-1");
    expect(() => empty.llm()).toThrow(/no LLM resource in resources \(none published\)/);
    let err: AglError | undefined;
    try {
      typed.promptTemplate("config");
    } catch (e) {
      err = e as AglError;
    }
    expect(err).toBeInstanceOf(AglError);
    expect(err?.code).toBe("resource_missing");
    expect(err?.message).toContain('no prompt template resource named "config"');
    expect(err?.message).toContain("names: main, policy, greeting, system, config");
  });

  it("forms proxy URLs as {endpoint without /v1}/rollout/{id}/attempt/{id}/v1", () => {
    expect(bindProxyEndpoint("http://h:1/v1", "ro-1", "at-2")).toBe("http://h:1/rollout/ro-1/attempt/at-2/v1");
    expect(bindProxyEndpoint("http://h:1/v1/", "ro-1", "at-2")).toBe("http://h:1/rollout/ro-1/attempt/at-2/v1");
    expect(bindProxyEndpoint("http://h:1", "ro-1", "at-2")).toBe("http://h:1/rollout/ro-1/attempt/at-2/v1");
    expect(bindProxyEndpoint("http://h:1/base/v1", "ro-1", "at-2")).toBe("http://h:1/base/rollout/ro-1/attempt/at-2/v1");
    expect(() => bindProxyEndpoint("http://h:1", "", "at-2")).toThrow(AglError);
  });
});

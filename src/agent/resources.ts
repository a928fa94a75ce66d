import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { type Resource, TemplateEngine } from "../gen/agl/v1/types_pb.js";
import { AglError } from "../core/errors.js";
import { renderFString } from "./f-string.js";
import { type JinjaRenderOptions, renderJinja } from "./jinja.js";
import { bindProxyEndpoint } from "./proxy-url.js";

/** An OpenAI-compatible endpoint, already bound to the attempt when it is the LLM proxy. */
export interface LlmResource {
  readonly kind: "llm";
  /** Base URL to give the client (`baseURL` of the openai client). */
  readonly endpoint: string;
  readonly model: string;
  readonly apiKey?: string;
  /** temperature, top_p, max_tokens, … as published. */
  readonly samplingParameters: JsonObject;
  /** Whether the published resource was the proxy (then `endpoint` is this attempt's proxy URL). */
  readonly proxied: boolean;
}

/** The template engines a prompt template may use. */
export type TemplateEngineName = "f-string" | "jinja";

/** A prompt template; `format` renders it and throws an AglError (`template_render`) that names what went wrong. */
export interface PromptTemplateResource {
  readonly kind: "prompt_template";
  readonly template: string;
  readonly engine: TemplateEngineName;
  format(vars: Record<string, unknown>, options?: JinjaRenderOptions): string;
}

/** Any other resource: a JSON value. */
export interface JsonResource {
  readonly kind: "json";
  readonly value: JsonValue;
}

export type AgentResource = LlmResource | PromptTemplateResource | JsonResource;

/** The named resources of a rollout's snapshot, with typed accessors. */
export interface Resources {
  /** Snapshot id and version the rollout runs against (empty and 0 when nothing was published). */
  readonly resourcesId: string;
  readonly version: number;
  readonly names: readonly string[];
  get(name: string): AgentResource | undefined;
  /**
   * The LLM named `name`. With no name: the only LLM; else the only LLM proxy (bound to this attempt, so the proxy
   * records the calls with their token ids); else the one named `main_llm`. Throws when there is none, or when that
   * leaves a choice (the error names the candidates).
   */
  llm(name?: string): LlmResource;
  /** The prompt template named `name`, or the first one. Throws when there is none. */
  promptTemplate(name?: string): PromptTemplateResource;
  /** The JSON resource named `name`. Throws when there is none. */
  json<T extends JsonValue = JsonValue>(name: string): T;
}

/** Creates a prompt template resource. */
export function promptTemplate(template: string, engine: TemplateEngineName = "f-string", label = "template"): PromptTemplateResource {
  return {
    kind: "prompt_template",
    template,
    engine,
    format: (vars, options) => (engine === "jinja" ? renderJinja(template, vars, label, options) : renderFString(template, vars, label)),
  };
}

/** What a runner hands to the thread running an agent: the snapshot as stored, and the attempt it is for. */
export interface ResourcesData {
  resourcesId: string;
  version: number;
  resources: Record<string, Resource>;
}

/**
 * Builds typed resources from a stored snapshot, binding proxy LLMs to the attempt; a proxy LLM without an API key
 * gets `proxyApiKey` (the runner's store token), which the agl proxy checks.
 */
export function resolveResources(data: ResourcesData, rolloutId: string, attemptId: string, proxyApiKey?: string): Resources {
  const typed = new Map<string, AgentResource>();
  for (const [name, resource] of Object.entries(data.resources)) {
    const kind = resource.kind;
    if (kind.case === "llm" || kind.case === "proxyLlm") {
      const llm = kind.value;
      const proxied = kind.case === "proxyLlm";
      const apiKey = llm.apiKey || (proxied ? proxyApiKey : undefined);
      typed.set(name, {
        kind: "llm",
        endpoint: proxied ? bindProxyEndpoint(llm.endpoint, rolloutId, attemptId) : llm.endpoint,
        model: llm.model,
        ...(apiKey ? { apiKey } : {}),
        samplingParameters: llm.samplingParameters ?? {},
        proxied,
      });
    } else if (kind.case === "promptTemplate") {
      const engine = kind.value.engine === TemplateEngine.JINJA ? "jinja" : "f-string";
      typed.set(name, promptTemplate(kind.value.template, engine, `prompt template "${name}"`));
    } else if (kind.case === "json") {
      typed.set(name, { kind: "json", value: toJson(ValueSchema, kind.value) });
    }
  }
  const names = [...typed.keys()];
  const missing = (what: string, name?: string): never => {
    const which = name === undefined ? `no ${what} resource` : `no ${what} resource named "${name}"`;
    throw new AglError(
      "resource_missing",
      `${which} in resources ${data.resourcesId || "(none published)"} (names: ${names.join(", ") || "none"})`,
    );
  };
  const pick = <K extends AgentResource["kind"]>(kind: K, what: string, name?: string) => {
    const found = name === undefined ? [...typed.values()].find((r) => r.kind === kind) : typed.get(name);
    if (!found || found.kind !== kind) return missing(what, name);
    return found as Extract<AgentResource, { kind: K }>;
  };
  const defaultLlm = (): LlmResource => {
    const llms = [...typed].filter((entry): entry is [string, LlmResource] => entry[1].kind === "llm");
    const proxied = llms.filter(([, llm]) => llm.proxied);
    const only = llms.length === 1 ? llms : proxied.length === 1 ? proxied : llms.filter(([name]) => name === "main_llm");
    if (only.length === 1) return (only[0] as [string, LlmResource])[1];
    if (llms.length === 0) return missing("LLM");
    const candidates = (proxied.length > 1 ? proxied : llms).map(([name, llm]) => `"${name}" (${llm.proxied ? "proxy" : llm.endpoint})`);
    throw new AglError(
      "resource_ambiguous",
      `resources ${data.resourcesId || "(none published)"} hold several LLMs and none is the default (the only LLM proxy, else ` +
        `"main_llm"): ${candidates.join(", ")}; name one: resources.llm("…")`,
    );
  };
  return {
    resourcesId: data.resourcesId,
    version: data.version,
    names,
    get: (name) => typed.get(name),
    llm: (name) => (name === undefined ? defaultLlm() : pick("llm", "LLM", name)),
    promptTemplate: (name) => pick("prompt_template", "prompt template", name),
    json: <T extends JsonValue>(name: string) => pick("json", "JSON", name).value as T,
  };
}

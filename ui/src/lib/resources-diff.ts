import { type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type LLM, type Resource, TemplateEngine } from "../../../src/gen/agl/v1/types_pb.js";
import { formatJson } from "./format.js";
import { type DiffRow, hasChanges, sideBySide } from "./text-diff.js";

export type ResourceKind = "llm" | "proxy_llm" | "prompt_template" | "json" | "empty";

/** A field of an LLM endpoint in both versions. */
export interface FieldChange {
  field: string;
  a: string;
  b: string;
  changed: boolean;
}

/** How one named resource differs between two snapshots. */
export interface ResourceDiff {
  name: string;
  change: "added" | "removed" | "changed" | "same";
  kind: ResourceKind;
  /** Prompt templates and JSON: a side-by-side line diff. */
  rows?: DiffRow[];
  /** LLM endpoints (and a template's engine): field by field. */
  fields?: FieldChange[];
}

/** The kind of a resource as the UI names it. */
export function resourceKind(resource: Resource | undefined): ResourceKind {
  switch (resource?.kind.case) {
    case "llm":
      return "llm";
    case "proxyLlm":
      return "proxy_llm";
    case "promptTemplate":
      return "prompt_template";
    case "json":
      return "json";
    default:
      return "empty";
  }
}

/** An LLM endpoint's fields as text. The API key is never shown, only whether one is set. */
function llmFields(llm: LLM | undefined): Record<string, string> {
  if (llm === undefined) return {};
  return {
    endpoint: llm.endpoint,
    model: llm.model,
    api_key: llm.apiKey === "" ? "" : "(set)",
    sampling_parameters: llm.samplingParameters ? JSON.stringify(llm.samplingParameters) : "",
  };
}

/** The text a resource diffs by, line by line: a template's text, JSON pretty-printed. */
function resourceText(resource: Resource | undefined): string {
  const kind = resource?.kind;
  if (kind?.case === "promptTemplate") return kind.value.template;
  if (kind?.case === "json") return formatJson(toJson(ValueSchema, kind.value) as JsonValue);
  return "";
}

const engineName = (engine: TemplateEngine) =>
  engine === TemplateEngine.JINJA ? "jinja" : engine === TemplateEngine.F_STRING ? "f-string" : "unspecified";

/**
 * Compares two snapshots' resources by name: added, removed, changed or the same, with a line diff of templates and
 * JSON and a field diff of LLM endpoints. Names come sorted, changed ones first.
 */
export function diffResources(a: Record<string, Resource> | undefined, b: Record<string, Resource> | undefined): ResourceDiff[] {
  const before = a ?? {};
  const after = b ?? {};
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const diffs = names.map((name) => diffOne(name, before[name], after[name]));
  const rank = { changed: 0, added: 1, removed: 2, same: 3 } as const;
  return diffs.sort((x, y) => rank[x.change] - rank[y.change] || x.name.localeCompare(y.name));
}

function diffOne(name: string, a: Resource | undefined, b: Resource | undefined): ResourceDiff {
  const kind = resourceKind(b ?? a);
  const change = a === undefined ? "added" : b === undefined ? "removed" : undefined;
  if (kind === "llm" || kind === "proxy_llm") {
    const fa = llmFields(llmOf(a));
    const fb = llmFields(llmOf(b));
    const fields = [...new Set([...Object.keys(fa), ...Object.keys(fb)])].map((field) => ({
      field,
      a: fa[field] ?? "",
      b: fb[field] ?? "",
      changed: (fa[field] ?? "") !== (fb[field] ?? ""),
    }));
    const kindChanged = a !== undefined && b !== undefined && resourceKind(a) !== resourceKind(b);
    return { name, kind, fields, change: change ?? (kindChanged || fields.some((f) => f.changed) ? "changed" : "same") };
  }
  const rows = sideBySide(resourceText(a), resourceText(b));
  const out: ResourceDiff = { name, kind, rows, change: change ?? (hasChanges(rows) ? "changed" : "same") };
  if (kind === "prompt_template") {
    const ea = a?.kind.case === "promptTemplate" ? engineName(a.kind.value.engine) : "";
    const eb = b?.kind.case === "promptTemplate" ? engineName(b.kind.value.engine) : "";
    out.fields = [{ field: "engine", a: ea, b: eb, changed: ea !== eb }];
    if (out.change === "same" && ea !== eb) out.change = "changed";
  }
  return out;
}

function llmOf(resource: Resource | undefined): LLM | undefined {
  const kind = resource?.kind;
  return kind?.case === "llm" || kind?.case === "proxyLlm" ? kind.value : undefined;
}

import { create, fromJson, type JsonObject, type JsonValue, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Resource, ResourceSchema, type ResourcesUpdate, TemplateEngine } from "../../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../store/store-api.js";
import type { TemplateText } from "./placeholders.js";

/** A resource as given to APO to publish beside the templates (an LLM endpoint, JSON settings, …). */
export type ResourceInit = MessageInitShape<typeof ResourceSchema>;

/** The resource name under which APO keeps its own record in every snapshot it publishes. */
export const APO_RECORD = "_apo";

/** A prompt candidate: one text per optimized template, published as its own resources snapshot. */
export interface Candidate {
  /** `seed`, or `r{round}p{parent slot}b{branch}` for a child. */
  key: string;
  templates: Record<string, TemplateText>;
  /** The snapshot rollouts of this candidate run against: `apo-{run}-{key}`. */
  resourcesId: string;
  round: number;
  parentKey?: string;
  /** The template this candidate's edit changed. */
  target?: string;
  /** Creation order, the tie-break when scores are equal. */
  order: number;
}

/** The id of a run's snapshot `suffix`. */
export const snapshotId = (runId: string, suffix: string) => `apo-${runId}-${suffix}`;

/** Whether two candidates have the same texts. */
export function sameTemplates(a: Record<string, TemplateText>, b: Record<string, TemplateText>): boolean {
  return Object.keys(a).every((name) => a[name]?.template === b[name]?.template && a[name]?.engine === b[name]?.engine);
}

/** The resources of a snapshot: the templates, the extra resources, and APO's record. */
export function snapshotResources(
  templates: Record<string, TemplateText>,
  extra: Record<string, ResourceInit>,
  record: JsonObject,
): Record<string, Resource> {
  const out: Record<string, Resource> = {};
  for (const [name, init] of Object.entries(extra)) out[name] = create(ResourceSchema, init);
  for (const [name, text] of Object.entries(templates)) {
    const engine = text.engine === "jinja" ? TemplateEngine.JINJA : TemplateEngine.F_STRING;
    out[name] = create(ResourceSchema, { kind: { case: "promptTemplate", value: { template: text.template, engine } } });
  }
  out[APO_RECORD] = create(ResourceSchema, { kind: { case: "json", value: fromJson(ValueSchema, record) } });
  return out;
}

/** Publishes a snapshot under its chosen id (a new version when it exists). */
export function publishSnapshot(store: StoreApi, resourcesId: string, resources: Record<string, Resource>): Promise<ResourcesUpdate> {
  return store.updateResources({ resourcesId, resources, createIfMissing: true });
}

/** A published snapshot, or undefined when there is none with that id. */
export async function findSnapshot(store: StoreApi, resourcesId: string): Promise<ResourcesUpdate | undefined> {
  try {
    return await store.getResources({ resourcesId });
  } catch (error) {
    if (ConnectError.from(error).code === Code.NotFound) return undefined;
    throw error;
  }
}

/** APO's record in a snapshot, and its template texts. */
export function readSnapshot(update: ResourcesUpdate): { record: JsonObject; templates: Record<string, TemplateText> } {
  const templates: Record<string, TemplateText> = {};
  let record: JsonObject = {};
  for (const [name, resource] of Object.entries(update.resources)) {
    const kind = resource.kind;
    if (name === APO_RECORD && kind.case === "json") record = toJson(ValueSchema, kind.value) as JsonObject;
    else if (kind.case === "promptTemplate") {
      templates[name] = { template: kind.value.template, engine: kind.value.engine === TemplateEngine.JINJA ? "jinja" : "f-string" };
    }
  }
  return { record, templates };
}

/** A JSON-safe copy of a candidate's texts. */
export const templatesJson = (templates: Record<string, TemplateText>): JsonValue =>
  Object.fromEntries(Object.entries(templates).map(([name, t]) => [name, { template: t.template, engine: t.engine }]));

import { create } from "@bufbuild/protobuf";
import {
  AddResourcesRequestSchema,
  GetResourcesRequestSchema,
  QueryResourceVersionsRequestSchema,
  QueryResourcesRequestSchema,
  UpdateResourcesRequestSchema,
  WatchResourcesRequestSchema,
} from "../gen/agl/v1/resources_pb.js";
import { type Resource, type ResourcesUpdate, ResourcesUpdateSchema, TemplateEngine } from "../gen/agl/v1/types_pb.js";
import type { StoreEvent } from "./backend.js";
import { pageInfo, type StoreContext } from "./context.js";
import { invalidArgument, notFound, resourceExhausted } from "./errors.js";
import { newResourcesId } from "./ids.js";
import type { StoreApi } from "./store-api.js";
import { checkEnum, checkId, checkStruct, checkValue, toPageSpec } from "./validate.js";

type ResourceMethods = Pick<
  StoreApi,
  "addResources" | "updateResources" | "getResources" | "getLatestResources" | "queryResources" | "queryResourceVersions" | "watchResources"
>;

/** Versions a watcher may fall behind by before its stream is ended (it can reconnect with include_latest). */
const watchBacklog = 1_000;

function checkResources(resources: Record<string, Resource>): void {
  for (const [name, resource] of Object.entries(resources)) {
    if (!name) throw invalidArgument("resources: names must not be empty");
    const kind = resource.kind;
    switch (kind.case) {
      case "llm":
      case "proxyLlm":
        if (!kind.value.endpoint) throw invalidArgument(`resources["${name}"]: an LLM needs an endpoint`);
        checkStruct(kind.value.samplingParameters, `resources["${name}"].sampling_parameters`);
        break;
      case "promptTemplate":
        checkEnum(kind.value.engine, TemplateEngine, `resources["${name}"].prompt_template.engine`);
        break;
      case "json":
        checkValue(kind.value, `resources["${name}"].json`);
        break;
      default:
        throw invalidArgument(`resources["${name}"]: set one of llm, proxy_llm, prompt_template or json`);
    }
  }
}

/** Versioned resources: every add or update publishes an immutable version that becomes the latest. */
export function resourceMethods(ctx: StoreContext): ResourceMethods {
  const { limits } = ctx;
  return {
    async addResources(init) {
      const req = create(AddResourcesRequestSchema, init);
      checkResources(req.resources);
      return ctx.write(async (tx) => {
        const now = ctx.now();
        const update = create(ResourcesUpdateSchema, {
          resourcesId: newResourcesId(),
          createTime: now,
          updateTime: now,
          version: 1,
          resources: req.resources,
        });
        await tx.insertResources(update);
        tx.notify({ kind: "resources", update });
        return update;
      });
    },

    async updateResources(init) {
      const req = create(UpdateResourcesRequestSchema, init);
      checkId(req.resourcesId, "resources_id", limits);
      checkResources(req.resources);
      await ctx.maybeScan();
      return ctx.write(async (tx) => {
        const now = ctx.now();
        const existing = await tx.getResources(req.resourcesId);
        if (!existing && !req.createIfMissing) {
          throw notFound(`resources ${JSON.stringify(req.resourcesId)} not found (set create_if_missing to create it)`);
        }
        const update = create(ResourcesUpdateSchema, {
          resourcesId: req.resourcesId,
          createTime: existing?.createTime ?? now,
          updateTime: now,
          version: (existing?.version ?? 0) + 1,
          resources: req.resources,
        });
        if (existing) await tx.putResources(update);
        else await tx.insertResources(update);
        tx.notify({ kind: "resources", update });
        return update;
      });
    },

    async getResources(init) {
      const req = create(GetResourcesRequestSchema, init);
      checkId(req.resourcesId, "resources_id", limits);
      const update = await ctx.read(async (tx) => {
        const current = await tx.getResources(req.resourcesId);
        if (!current) throw notFound(`resources ${JSON.stringify(req.resourcesId)} not found`);
        if (!req.version || req.version === current.version) return current;
        const past = await tx.getResourcesVersion(req.resourcesId, req.version);
        if (!past) {
          throw notFound(`resources ${JSON.stringify(req.resourcesId)} have no version ${req.version} (versions 1 to ${current.version})`);
        }
        return past;
      });
      return update;
    },

    async queryResourceVersions(init) {
      const req = create(QueryResourceVersionsRequestSchema, init);
      checkId(req.resourcesId, "resources_id", limits);
      const page = toPageSpec(req.page, "resource_versions", limits);
      return ctx.read(async (tx) => {
        if (!(await tx.getResources(req.resourcesId))) throw notFound(`resources ${JSON.stringify(req.resourcesId)} not found`);
        const result = await tx.queryResourceVersions(req.resourcesId, page);
        return { $typeName: "agl.v1.QueryResourceVersionsResponse", resources: result.items, page: pageInfo(result.total, page) };
      });
    },

    async getLatestResources() {
      const resources = await ctx.read((tx) => tx.latestResources());
      return { $typeName: "agl.v1.GetLatestResourcesResponse", resources };
    },

    async queryResources(init) {
      const req = create(QueryResourcesRequestSchema, init);
      const page = toPageSpec(req.page, "resources", limits);
      const filter = {
        resourcesId: req.resourcesId || undefined,
        resourcesIdContains: req.resourcesIdContains || undefined,
      };
      const result = await ctx.read((tx) => tx.queryResources(filter, page));
      return { $typeName: "agl.v1.QueryResourcesResponse", resources: result.items, page: pageInfo(result.total, page) };
    },

    async *watchResources(init, options) {
      const req = create(WatchResourcesRequestSchema, init);
      const backlog: ResourcesUpdate[] = [];
      let wake: (() => void) | undefined;
      let overflow = false;
      // Listen before reading the latest version so nothing published in between is missed.
      const stop = ctx.waiters.listen((event: StoreEvent) => {
        if (event.kind !== "resources") return;
        if (backlog.length >= watchBacklog) overflow = true;
        else backlog.push(event.update);
        wake?.();
      });
      const signal = options?.signal;
      const onAbort = () => wake?.();
      signal?.addEventListener("abort", onAbort);
      try {
        let lastSent: ResourcesUpdate | undefined;
        if (req.includeLatest) {
          lastSent = await ctx.read((tx) => tx.latestResources());
          if (lastSent) yield lastSent;
        }
        while (!signal?.aborted) {
          const next = backlog.shift();
          if (next) {
            const same = lastSent?.resourcesId === next.resourcesId && lastSent.version >= next.version;
            if (!same) yield structuredClone(next);
            continue;
          }
          if (overflow) throw resourceExhausted("watcher fell too far behind; reconnect with include_latest");
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
      } finally {
        stop();
        signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}

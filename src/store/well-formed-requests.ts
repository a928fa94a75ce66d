import type { DescMethod } from "@bufbuild/protobuf";
import { ResourceService } from "../gen/agl/v1/resources_pb.js";
import { LightningStore } from "../gen/agl/v1/store_pb.js";
import type { StoreApi } from "./store-api.js";
import { ensureWellFormedText } from "./well-formed-text.js";

type Method = (request: object, ...rest: unknown[]) => unknown;

/**
 * The store's methods, taking every request's text as well-formed UTF-16: lone surrogates (which only JSON and
 * in-process callers can send) become U+FFFD before anything is checked, stored or matched. gRPC, SQLite and
 * PostgreSQL would make that replacement anyway on the way through UTF-8, so every protocol and backend reads back
 * the same text (docs/store-semantics.md, "Text").
 */
export function withWellFormedRequests<T extends Partial<StoreApi>>(methods: T): T {
  const out: Record<string, Method> = { ...(methods as Record<string, Method>) };
  const methodsOf = [...LightningStore.methods, ...ResourceService.methods] as DescMethod[];
  for (const method of methodsOf) {
    const impl = out[method.localName];
    if (!impl) continue;
    out[method.localName] = (request, ...rest) => impl(ensureWellFormedText(method.input, request), ...rest);
  }
  return out as T;
}

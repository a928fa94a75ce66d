import type { Scope } from "../core/credentials.js";
import type { ProxyRoute } from "./proxy-routes.js";

/**
 * The scope each kind of proxy route needs (`admin` may do everything), listed in `docs/proxy-and-triplets.md`:
 * agents call the LLM with their runner's token, the trainer pauses and drains the proxy. A new route kind must be
 * added here, or it does not type-check.
 */
export const PROXY_ROUTE_SCOPES: Readonly<Record<Exclude<ProxyRoute["kind"], "method_not_allowed">, readonly Scope[]>> = {
  call: ["runner", "trainer"],
  models: ["runner", "trainer", "reader"],
  count_tokens: ["runner", "trainer"],
  admin: ["trainer"],
};

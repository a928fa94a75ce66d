import { pathToFileURL } from "node:url";
import { isAbsolute, resolve } from "node:path";
import { type Agent, isAgent } from "./agent.js";
import { AglError } from "../core/errors.js";

/**
 * Imports an agent module by path or URL and returns its agent: the named export `exportName` when given, else the
 * default export, else an export named `agent`. An exported class is instantiated with no arguments.
 */
export async function loadAgent(modulePath: string, exportName?: string): Promise<Agent<unknown>> {
  const url = /^[a-z]+:/i.test(modulePath) && !isAbsolute(modulePath) ? modulePath : pathToFileURL(resolve(modulePath)).href;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw new AglError("agent_load", `cannot import agent module ${modulePath}: ${(error as Error).message}${hintFor(error)}`, {
      cause: error,
    });
  }
  const names = exportName ? [exportName] : ["default", "agent"];
  for (const name of names) {
    let value = mod[name];
    if (typeof value === "function" && typeof (value as { prototype?: Agent }).prototype?.rollout === "function") {
      value = new (value as new () => Agent<unknown>)();
    }
    if (isAgent(value)) return value;
  }
  throw new AglError(
    "agent_load",
    `${modulePath} exports no agent${exportName ? ` named "${exportName}"` : ""}: export default rollout(fn), an object with ` +
      `rollout(), or a class with rollout()`,
  );
}

/** What to change when a module failed to load for how it is packaged rather than for what it contains. */
function hintFor(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === "ERR_UNKNOWN_FILE_EXTENSION") return " (TypeScript agents need tsx: run them with `agl run`, or `node --import tsx`)";
  if (
    code === "ERR_REQUIRE_CYCLE_MODULE" ||
    code === "ERR_REQUIRE_ESM" ||
    /Cannot use import statement outside a module/.test(message ?? "")
  ) {
    return ' (the module is ESM loaded as CommonJS: name it .mts/.mjs, or add "type": "module" to its package.json)';
  }
  return "";
}

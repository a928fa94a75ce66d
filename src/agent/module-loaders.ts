import { register } from "node:module";

const flags = globalThis as { __aglTsxRegistered?: boolean; __aglEsmHookRegistered?: boolean };

// Runs in Node's loader-hooks thread, after tsx (hooks registered later run first). tsx gives a `.ts` file the format
// of its package (CommonJS where package.json has no `"type": "module"`, or where there is none), and an ES-module
// agent turned into CommonJS then `require()`s ES modules that are already loading ("Cannot require() ES Module … in a
// cycle"). A file with import/export statements is an ES module whatever its package says; CommonJS files stay as they
// are, and so do .cts/.cjs files and dependencies.
const esmFormatHook = `
import { readFile } from "node:fs/promises";
const esmSyntax = /^[ \\t]*(?:import[ \\t]*[\\w{*"']|export[ \\t{*])/m;
const candidate = (url) => /^file:[^?#]*\\.(?:m?tsx?|jsx?)(?:[?#]|$)/.test(url) && !url.includes("/node_modules/");
export async function load(url, context, next) {
  if (context.format === "commonjs" && candidate(url)) {
    const source = await readFile(new URL(url), "utf8").catch(() => "");
    if (esmSyntax.test(source)) return next(url, { ...context, format: "module" });
  }
  return next(url, context);
}`;

/**
 * Prepares this thread to import an agent module wherever it lives: registers tsx for TypeScript (`.ts`, `.mts`,
 * `.tsx`) unless it already is, and loads files written as ES modules as ES modules even outside a
 * `"type": "module"` package (a temp dir with no package.json, a package.json without `type`). Idempotent per thread.
 */
export async function registerAgentLoaders(modulePath: string): Promise<void> {
  if (/\.[mc]?tsx?$/.test(modulePath) && !flags.__aglTsxRegistered) {
    const tsx = await import("tsx/esm/api");
    tsx.register();
    flags.__aglTsxRegistered = true;
  }
  if (!flags.__aglEsmHookRegistered) {
    register(`data:text/javascript,${encodeURIComponent(esmFormatHook)}`);
    flags.__aglEsmHookRegistered = true;
  }
}

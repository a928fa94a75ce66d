import { Environment, Interpreter, Template } from "@huggingface/jinja";
import { AglError } from "../core/errors.js";

/** Options of {@link renderJinja}. */
export interface JinjaRenderOptions {
  /**
   * Fail on a variable that is neither given nor defined by the template (Jinja's StrictUndefined). Names tested with
   * `is defined`/`is undefined` or given a `default(…)` are allowed to be missing. Default true.
   */
  strict?: boolean;
}

const templates = new Map<string, Template>();

// What agl uses of @huggingface/jinja's Environment (its typings do not resolve under NodeNext).
interface JinjaEnvironment {
  variables: Map<string, unknown>;
  set(name: string, value: unknown): unknown;
}

/**
 * A global scope with the helpers Template.render installs (not exported by the library), that remembers the variables
 * the template looked up and nobody defined.
 */
function createEnvironment(missing: Set<string>): JinjaEnvironment {
  const env = new (Environment as unknown as new () => JinjaEnvironment)();
  // `resolve` is private in the typings; nested scopes call it on their parent, ending here for unknown names.
  (env as unknown as { resolve(name: string): JinjaEnvironment }).resolve = (name) => {
    if (!env.variables.has(name)) missing.add(name);
    return env;
  };
  const constants: [string, unknown][] = [
    ["true", true],
    ["false", false],
    ["none", null],
    ["True", true],
    ["False", false],
    ["None", null],
  ];
  for (const [name, value] of constants) env.set(name, value);
  env.set("raise_exception", (message: unknown) => {
    throw new Error(String(message));
  });
  env.set("range", (start: number, stop?: number, step = 1) => {
    const [from, to] = stop === undefined ? [0, start] : [start, stop];
    const out: number[] = [];
    for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(i);
    return out;
  });
  return env;
}

/**
 * Renders a Jinja template with @huggingface/jinja. Syntax errors, errors raised while rendering and (in strict mode)
 * missing variables throw an {@link AglError} (`template_render`) naming the template and the cause.
 */
export function renderJinja(source: string, vars: Record<string, unknown>, label = "template", options: JinjaRenderOptions = {}): string {
  const fail = (message: string, cause?: unknown): never => {
    throw new AglError("template_render", `cannot render ${label} (jinja): ${message}`, { cause });
  };
  let template = templates.get(source);
  if (!template) {
    try {
      template = new Template(source);
    } catch (error) {
      return fail(`syntax error: ${(error as Error).message}`, error);
    }
    if (templates.size > 256) templates.clear();
    templates.set(source, template);
  }
  const missing = new Set<string>();
  const env = createEnvironment(missing);
  for (const [key, value] of Object.entries(vars)) env.set(key, value);
  let rendered: string;
  try {
    rendered = new Interpreter(env as never).run(template.parsed).value as string;
  } catch (error) {
    return fail((error as Error).message, error);
  }
  if (options.strict !== false) {
    const guarded = new Set(
      [...source.matchAll(/([A-Za-z_]\w*)\s+is\s+(?:not\s+)?(?:defined|undefined)|([A-Za-z_]\w*)\s*\|\s*(?:default|d)\b/g)].map(
        (m) => m[1] ?? m[2],
      ),
    );
    const unknown = [...missing].filter((name) => !guarded.has(name));
    if (unknown.length > 0) {
      fail(
        `missing variable${unknown.length > 1 ? "s" : ""} ${unknown.map((n) => `'${n}'`).join(", ")} (given: ` +
          `${Object.keys(vars).join(", ") || "none"})`,
      );
    }
  }
  return rendered;
}

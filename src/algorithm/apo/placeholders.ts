import type { JsonValue } from "@bufbuild/protobuf";
import { promptTemplate, type TemplateEngineName } from "../../agent/resources.js";
import { AglError } from "../../core/errors.js";

/** A prompt template being optimized. */
export interface TemplateText {
  template: string;
  engine: TemplateEngineName;
}

const isObject = (v: JsonValue): v is { [k: string]: JsonValue } => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Sample values for the variables a template may use: the fields every task has (tasks that are JSON objects), plus
 * `extra` names the agent supplies itself (given a placeholder value). A field takes its value from the first task.
 */
export function probeVariables(tasks: readonly JsonValue[], extra: readonly string[] = []): Record<string, unknown> {
  const objects = tasks.filter(isObject);
  const probe: Record<string, unknown> = {};
  if (objects.length === tasks.length && objects.length > 0) {
    const [first, ...rest] = objects as [{ [k: string]: JsonValue }, ...{ [k: string]: JsonValue }[]];
    for (const key of Object.keys(first)) if (rest.every((o) => Object.hasOwn(o, key))) probe[key] = first[key];
  }
  for (const name of extra) if (!Object.hasOwn(probe, name)) probe[name] = `<${name}>`;
  return probe;
}

/** The error of rendering `text` with `vars`, or undefined when it renders. */
function renderError(text: TemplateText, vars: Record<string, unknown>, label: string): string | undefined {
  try {
    promptTemplate(text.template, text.engine, label).format(vars);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** The probe variables a template really uses: those whose absence makes it fail to render. */
export function usedVariables(text: TemplateText, probe: Record<string, unknown>): string[] {
  return Object.keys(probe).filter((name) => {
    const { [name]: _omitted, ...rest } = probe;
    return renderError(text, rest, "template") !== undefined;
  });
}

/**
 * Checks a seed template before anything runs: it must render with the known variables. Throws an
 * {@link AglError} (`unknown_placeholder`) naming the template, the renderer's complaint and the known variables.
 */
export function checkSeedTemplate(name: string, text: TemplateText, probe: Record<string, unknown>): void {
  const error = renderError(text, probe, `prompt template "${name}"`);
  if (error === undefined) return;
  const known = Object.keys(probe);
  throw new AglError(
    "unknown_placeholder",
    `${error}. Known variables: ${known.join(", ") || "none"} (the fields every task has` +
      ` plus those given with --var / options.variables).`,
  );
}

/**
 * Why an edited template cannot replace `parent`, or undefined when it can: it must render with the known variables
 * and keep every variable the parent uses (an edit that drops one loses task data).
 */
export function editDefect(edit: TemplateText, parent: TemplateText, probe: Record<string, unknown>): string | undefined {
  if (!edit.template.trim()) return "the edit is empty";
  const error = renderError(edit, probe, "the edited template");
  if (error !== undefined) return error;
  const kept = new Set(usedVariables(edit, probe));
  const dropped = usedVariables(parent, probe).filter((v) => !kept.has(v));
  return dropped.length > 0
    ? `the edit drops placeholder${dropped.length > 1 ? "s" : ""} ${dropped.map((v) => `{${v}}`).join(", ")}`
    : undefined;
}

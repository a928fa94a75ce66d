import { readFile } from "node:fs/promises";
import type { JsonValue } from "@bufbuild/protobuf";
import { UsageError } from "./flags.js";

/** Reads a dataset: a JSON array, or JSONL (one task per line; blank lines skipped). */
export async function loadDataset(path: string, flag: string): Promise<JsonValue[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(`${flag}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const trimmed = text.trim();
  if (trimmed.startsWith("[")) {
    try {
      return JSON.parse(trimmed) as JsonValue[];
    } catch (error) {
      throw new UsageError(`${flag}: ${path} is not valid JSON: ${(error as Error).message}`);
    }
  }
  const items: JsonValue[] = [];
  trimmed.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    try {
      items.push(JSON.parse(line) as JsonValue);
    } catch (error) {
      throw new UsageError(`${flag}: ${path} line ${i + 1} is not JSON: ${(error as Error).message}`);
    }
  });
  return items;
}

/** Reads `--prompt` values: the text itself, or the contents of the file after `@`. */
export async function loadTemplates(prompts: readonly [string, string][]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, value] of prompts) {
    if (name in out) throw new UsageError(`--prompt ${name} is given twice`);
    if (!value.startsWith("@")) {
      out[name] = value;
      continue;
    }
    try {
      out[name] = (await readFile(value.slice(1), "utf8")).replace(/\n$/, "");
    } catch (error) {
      throw new UsageError(`--prompt ${name}: cannot read ${value.slice(1)} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  }
  return out;
}

/** Reads a prompt override file. */
export async function loadPromptFile(path: string, flag: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(`${flag}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const src = fileURLToPath(new URL("../../src/", import.meta.url));
/** Modules whose use means a test starts something (a process, a server, a socket): such a test belongs in test/. */
const starting = ["node:child_process", "node:net", "node:http", "node:http2", "node:worker_threads"];

function testsBesideTheCode(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "gen" ? [] : testsBesideTheCode(path);
    return entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** The part of `src/` a path is in (`store` for src/store/backends/sqlite/x.ts); `.` for the entry points. */
const partOf = (path: string) => (relative(src, path).split("/").length > 1 ? relative(src, path).split("/")[0]! : ".");

describe("tests beside the code (docs/development.md, Tests)", () => {
  const files = testsBesideTheCode(src);

  it("are found", () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it.each(files.map((file) => [relative(src, file), file]))(
    "%s imports only its part, src/core and src/gen, and starts nothing",
    (_name, file) => {
      const text = readFileSync(file, "utf8");
      const imported = [...text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => m[1]!);
      const outside = imported.filter((spec) => {
        if (!spec.startsWith(".")) return starting.includes(spec);
        const target = join(dirname(file), spec);
        if (!target.startsWith(src)) return true;
        return ![partOf(file), "core", "gen"].includes(partOf(target));
      });
      expect(outside).toEqual([]);
    },
  );
});

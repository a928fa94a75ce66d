import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServerProcess } from "./server-process.js";

describe("startServerProcess, compiled", () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  /** A checkout with one source file and, when `builtAgoMs` is given, a compiled CLI built that long before it. */
  function checkout(builtAgoMs?: number): string {
    const root = mkdtempSync(join(tmpdir(), "agl-built-"));
    roots.push(root);
    mkdirSync(join(root, "src", "store"), { recursive: true });
    writeFileSync(join(root, "src", "store", "ids.ts"), "export {};\n");
    writeFileSync(join(root, "src", "store", "ids.test.ts"), "export {};\n");
    if (builtAgoMs !== undefined) {
      mkdirSync(join(root, "dist", "cli"), { recursive: true });
      const main = join(root, "dist", "cli", "main.js");
      writeFileSync(main, "");
      const when = new Date(Date.now() - builtAgoMs);
      utimesSync(main, when, when);
    }
    return root;
  }

  it("refuses to run a compiled CLI that is missing or older than a source, and says what to run", async () => {
    const none = checkout();
    await expect(startServerProcess([], { compiled: true, root: none })).rejects.toThrow(
      `dist/cli/main.js does not exist: run \`make build\` in ${none}`,
    );
    const stale = checkout(60_000);
    await expect(startServerProcess([], { compiled: true, root: stale })).rejects.toThrow(
      `is older than ${join(stale, "src", "store", "ids.ts")}`,
    );
  });

  it("does not hold a test file against the build (tsc does not compile them)", async () => {
    const root = checkout(60_000);
    const past = new Date(Date.now() - 120_000);
    utimesSync(join(root, "src", "store", "ids.ts"), past, past);
    // Past the check: the empty CLI starts, prints no address, and exits.
    await expect(startServerProcess([], { compiled: true, root })).rejects.toThrow("server exited with 0 before listening");
  });
});

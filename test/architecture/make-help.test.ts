import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const repo = fileURLToPath(new URL("../../", import.meta.url));

it("make help lists every target of the Makefile, one line each", async () => {
  const makefile = await readFile(`${repo}Makefile`, "utf8");
  const phony = /^\.PHONY:(.*)$/m.exec(makefile)?.[1]?.trim().split(/\s+/) ?? [];
  const targets = [...makefile.matchAll(/^([a-z][a-z0-9-]*):/gm)].map((m) => m[1]!);
  const { stdout } = await promisify(execFile)("make", ["--no-print-directory", "help"], { cwd: repo });
  const listed = stdout.split("\n").flatMap((line) => /^ {2}make (\S+) {2,}\S/.exec(line)?.[1] ?? []);
  expect(new Set(targets)).toEqual(new Set(phony.filter((t) => t !== "FORCE")));
  expect(listed.sort()).toEqual([...targets].sort());
});

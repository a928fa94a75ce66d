#!/usr/bin/env node
// In a checkout (src/ present) run the TypeScript sources through tsx, so a stale dist/ never shadows them; an
// installed package ships dist/ only.
import { existsSync } from "node:fs";

const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register();
  globalThis.__aglTsxRegistered = true;
  await import(source.href);
} else {
  await import(new URL("../dist/cli/main.js", import.meta.url).href);
}

#!/usr/bin/env node
// In a checkout (src/ present) run the TypeScript sources through tsx, so a stale dist/ never shadows them; an
// installed package ships dist/ only.
import { existsSync } from "node:fs";

if (Number(process.versions.node.split(".")[0]) < 22) {
  console.error(
    `agl needs Node 22, 24 or 26; this is ${process.version}, past its end of life. In a checkout, run it through make ` +
      'or put the Node that make installs first on PATH: PATH="$(scripts/node-toolchain.sh install)/bin:$PATH"',
  );
  process.exit(1);
}

const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register();
  globalThis.__aglTsxRegistered = true;
  await import(source.href);
} else {
  await import(new URL("../dist/cli/main.js", import.meta.url).href);
}

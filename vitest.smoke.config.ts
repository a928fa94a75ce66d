import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/**
 * The smoke subset that `make test` runs on the other maintained Node lines (scripts/node-smoke.sh): the store's
 * conformance on the memory backend, token fidelity end to end, the runner pool and the examples. No database server.
 */
export default defineConfig({
  test: {
    ...base.test,
    include: ["test/conformance/*.test.ts", "test/e2e/*.test.ts", "test/runner/pool.test.ts", "test/examples/*.test.ts"],
    globalSetup: [],
    env: { AGL_CONFORMANCE_BACKENDS: "memory" },
  },
});

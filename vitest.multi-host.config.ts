import { defineConfig } from "vitest/config";

// `make test-multi-host`: the topology test alone (vitest.config.ts excludes it from the main suite).
export default defineConfig({
  test: {
    include: ["test/faults/multi-host.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});

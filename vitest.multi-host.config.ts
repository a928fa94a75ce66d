import { defineConfig } from "vitest/config";

// `make test-multi-host`: the topology test alone (it also runs in `make test`).
export default defineConfig({
  test: {
    include: ["test/faults/multi-host.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});

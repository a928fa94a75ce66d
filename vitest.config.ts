import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts", "ui/src/**/*.test.ts"],
    // The multi-host topology trains the demo to its target over network namespaces (8-10 min on a loaded 2-core
    // machine, not yet reliably green): its own target, `make test-multi-host`, until it fits the suite.
    exclude: ["**/node_modules/**", "test/faults/multi-host.test.ts"],
    // A real PostgreSQL server for the PostgreSQL backend's tests (started here unless AGL_TEST_POSTGRES_URL is set).
    globalSetup: ["test/support/postgres-global-setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites start real servers and processes; two cores run two files at a time.
    maxWorkers: 2,
  },
});

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts", "ui/src/**/*.test.ts"],
    // A real PostgreSQL server for the PostgreSQL backend's tests (started here unless AGL_TEST_POSTGRES_URL is set).
    globalSetup: ["test/support/postgres-global-setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites start real servers and processes; two cores run two files at a time.
    maxWorkers: 2,
  },
});

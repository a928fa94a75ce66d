import { defineConfig } from "vitest/config";

// The dashboard's logic (ui/src/lib): plain modules, tested in Node without a browser.
export default defineConfig({
  test: {
    include: ["ui/src/**/*.test.ts"],
  },
});

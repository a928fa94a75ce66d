import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const here = fileURLToPath(new URL(".", import.meta.url));

// The dashboard, built into dist/ui/ (served by `agl serve` at `/`). The dev server forwards the store's RPC paths
// (`/agl.v1.<Service>/<Method>`) to a running store.
export default defineConfig({
  root: here,
  base: "./",
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL("../dist/ui", import.meta.url)),
    emptyOutDir: true,
    // ECharts alone is ~600 kB minified; it has its own chunk.
    chunkSizeWarningLimit: 1200,
    rollupOptions: {
      output: {
        manualChunks: (id) => (id.includes("node_modules/echarts") || id.includes("node_modules/zrender") ? "echarts" : undefined),
      },
    },
  },
  server: {
    proxy: { "/agl.v1.": { target: process.env.AGL_STORE_URL ?? "http://127.0.0.1:4747", changeOrigin: true } },
  },
});

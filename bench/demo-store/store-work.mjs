// Preloaded into the store's process by `bench/demo-store/run.ts --work` (`--import`): counts what the process does in
// all, figures that drift far less with the machine's speed than CPU time: the bytes it allocated (what each
// collection found in use, less what the previous one left; what came after the last collection is not counted) and
// the promises it made. Written as JSON to $AGL_BENCH_WORK_OUT at exit.
// The promise hook costs CPU of its own: compare these figures with each other, not the CPU of such runs.
import { createHook } from "node:async_hooks";
import { writeFileSync } from "node:fs";
import { GCProfiler } from "node:v8";

let promises = 0;
createHook({
  init(_id, type) {
    if (type === "PROMISE") promises++;
  },
}).enable();
const profiler = new GCProfiler();
profiler.start();
process.on("exit", () => {
  let allocatedBytes = 0;
  let leftBytes = 0;
  for (const gc of profiler.stop().statistics) {
    allocatedBytes += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - leftBytes);
    leftBytes = gc.afterGC.heapStatistics.usedHeapSize;
  }
  writeFileSync(process.env.AGL_BENCH_WORK_OUT, JSON.stringify({ allocatedBytes, promises }));
});

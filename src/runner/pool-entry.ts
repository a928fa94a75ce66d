// Entry of pool worker threads in a built install (dist/). piscina tries `require()` on a worker file before
// `import()`, and a CommonJS hook in the thread (tsx's, inherited by the threads of a process started by the tsx CLI)
// then compiles agl's ES modules into a second, CommonJS copy beside the ES one the agent imports: twice the
// compiling and two of every module's state (the attempt context alone is shared between copies). A module with
// top-level await cannot be required, by Node or by such a hook, so piscina imports this one, and the thread has one
// copy of agl.
const worker = await import("./pool-worker.js");
export default worker.default;
export const ping = worker.ping;

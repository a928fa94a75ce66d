import { type ChildProcess, spawn } from "node:child_process";

/**
 * Spawns a process (in `cwd`) and resolves once it prints `listening on URL` on stdout: the loopback engine
 * (bench/proxy/engine.ts) and the proxies the benches start. Rejects with the end of its stderr if it exits first.
 */
export function startListening(
  command: string,
  argv: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(command, argv, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    err = (err + d.toString()).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m?.[1]) resolve({ url: m[1], child });
    });
    child.once("exit", (code) => reject(new Error(`${command} exited with ${code}:\n${err}`)));
  });
}

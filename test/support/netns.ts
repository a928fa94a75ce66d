/**
 * A network namespace joined to this host by a veth pair (through `scripts/netns.sh`, as root): processes run inside
 * it with `exec`, reach the host at `hostAddress`, and lose the network while the link is `cut()`. Names and the /30
 * subnet are random per namespace, so parallel test runs never collide.
 */
import { execFileSync } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("../../scripts/netns.sh", import.meta.url));
const sh = (...args: string[]) => execFileSync(script, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

export interface NetNamespace {
  readonly name: string;
  /** This host's end of the link (bind servers here). */
  readonly hostAddress: string;
  /** The namespace's end. */
  readonly nsAddress: string;
  /** The command prefix that runs a program inside the namespace: `ip netns exec <name>`. */
  readonly exec: string[];
  /** Takes the link down: packets between the namespace and the host are lost until `restore()`. */
  cut(): void;
  restore(): void;
  /** Established TCP connections inside the namespace to `port` on the host, as `local-port` strings. */
  connections(port: number): string[];
  /** Removes the namespace and the link (idempotent). */
  delete(): void;
}

/** Creates a namespace; throws with the reason when this machine cannot (not root, no iproute2 and no apt-get). */
export function createNetNamespace(): NetNamespace {
  const ip = sh("tools");
  const id = randomBytes(3).toString("hex");
  const name = `agl-${id}`;
  const hostIf = `aglh${id}`;
  const nsIf = `agln${id}`;
  let cidr = "";
  const used = execFileSync(ip, ["-o", "-4", "addr", "show"], { encoding: "utf8" });
  do cidr = `10.${randomInt(200, 250)}.${randomInt(0, 256)}.${randomInt(0, 64) * 4}`;
  while (used.includes(` ${cidr.slice(0, cidr.lastIndexOf("."))}.`));
  const base = Number(cidr.slice(cidr.lastIndexOf(".") + 1));
  const prefix = cidr.slice(0, cidr.lastIndexOf("."));
  try {
    sh("create", name, hostIf, nsIf, `${cidr}/30`);
  } catch (error) {
    sh("delete", name, hostIf);
    throw error;
  }
  return {
    name,
    hostAddress: `${prefix}.${base + 1}`,
    nsAddress: `${prefix}.${base + 2}`,
    exec: [ip, "netns", "exec", name],
    cut: () => void sh("cut", name, nsIf),
    restore: () => void sh("restore", name, nsIf),
    connections(port) {
      const out = execFileSync(ip, ["netns", "exec", name, "ss", "-Htn", "state", "established", `dport = :${port}`], { encoding: "utf8" });
      return out
        .split("\n")
        .map((line) => /\s(\S+):(\d+)\s+\S+:\d+\s*$/.exec(line.trim())?.[2])
        .filter((p): p is string => p !== undefined);
    },
    delete: () => void sh("delete", name, hostIf),
  };
}

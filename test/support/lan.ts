/**
 * Several hosts on one network, built from network namespaces by `scripts/netns.sh` (as root): a switch (a namespace
 * holding a bridge) that every host joins with one link, this host included (as an observer at `.1`), and optional
 * direct links between two hosts. Each link can be cut (the host's side taken down: nothing it sends or should
 * receive on it gets through) and restored. Names and subnets are random per run, so parallel runs never collide.
 */
import { execFileSync } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("../../scripts/netns.sh", import.meta.url));
const sh = (...args: string[]) => execFileSync(script, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

/** One host of the network. */
export interface LanHost {
  readonly name: string;
  /** Its address on the switch. */
  readonly address: string;
  /** The command prefix that runs a program on it: `ip netns exec <namespace>`. */
  readonly exec: string[];
  /** Its link to the switch, to cut and restore. */
  readonly link: LanLink;
}

/** A link that can be cut and restored. */
export interface LanLink {
  cut(): void;
  restore(): void;
}

export interface Lan {
  readonly hosts: Record<string, LanHost>;
  /** This host's address on the switch (the test's observer). */
  readonly observerAddress: string;
  /**
   * A direct link between two hosts: each end's address, and the link, cut on `b`'s side: `a` keeps its route, so
   * what it sends is lost silently (connections stall and retransmit) rather than refused.
   */
  pair(a: string, b: string): { aAddress: string; bAddress: string; link: LanLink };
  /** Removes every namespace and link (idempotent). */
  delete(): void;
}

/** Builds the network; throws with the reason when this machine cannot (not root, no iproute2 and no apt-get). */
export function createLan(hostNames: readonly string[]): Lan {
  const ip = sh("tools");
  const id = randomBytes(3).toString("hex");
  const used = execFileSync(ip, ["-o", "-4", "addr", "show"], { encoding: "utf8" });
  let prefix = "";
  do prefix = `10.${randomInt(200, 250)}.${randomInt(0, 256)}`;
  while (used.includes(` ${prefix}.`));
  const switchNs = `aglsw-${id}`;
  const namespaces = [switchNs];
  const remove = () => void sh("remove", ...namespaces);
  const link = (ns: string, dev: string): LanLink => ({ cut: () => void sh("cut", ns, dev), restore: () => void sh("restore", ns, dev) });
  const hosts: Record<string, LanHost> = {};
  let pairs = 0;
  try {
    sh("switch", switchNs);
    sh("join", switchNs, "-", `agl${id}o`, `${prefix}.1/24`);
    for (const [i, name] of hostNames.entries()) {
      const ns = `agl-${id}-${i}`;
      namespaces.push(ns);
      const dev = `agl${id}h${i}`;
      sh("join", switchNs, ns, dev, `${prefix}.${i + 2}/24`);
      hosts[name] = { name, address: `${prefix}.${i + 2}`, exec: [ip, "netns", "exec", ns], link: link(ns, dev) };
    }
  } catch (error) {
    remove();
    throw error;
  }
  const nsOf = (name: string) => {
    const host = hosts[name];
    if (!host) throw new Error(`no host ${name}`);
    return host.exec[3] as string;
  };
  return {
    hosts,
    observerAddress: `${prefix}.1`,
    pair(a, b) {
      const n = pairs++;
      // A /30 of its own per pair, beside the switch's /24.
      const base = `10.${Number(prefix.split(".")[1]) + 1}.${prefix.split(".")[2]}`;
      const [aAddress, bAddress] = [`${base}.${4 * n + 1}`, `${base}.${4 * n + 2}`];
      const [aDev, bDev] = [`agl${id}p${n}a`, `agl${id}p${n}b`];
      sh("pair", nsOf(a), aDev, `${aAddress}/30`, nsOf(b), bDev, `${bAddress}/30`);
      return { aAddress, bAddress, link: link(nsOf(b), bDev) };
    },
    delete: remove,
  };
}

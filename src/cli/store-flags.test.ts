import { describe, expect, it } from "vitest";
import { parseApoArgs } from "./apo-args.js";
import { UsageError } from "./flags.js";
import { parseProxyArgs } from "./proxy-args.js";
import { parseRunArgs } from "./run-args.js";
import { parseStoreConnection, storeConnectionArgv } from "./store-flags.js";
import { parseTrainArgs } from "./train-args.js";

const apo = ["agent.ts", "--train", "t.jsonl", "--val", "v.jsonl", "--prompt", "p=x"];
/** Each command's store connection, parsed from its own command line plus `flags`. */
const commands = {
  proxy: (flags: string[], env: NodeJS.ProcessEnv) => parseProxyArgs(flags, env).store,
  run: (flags: string[], env: NodeJS.ProcessEnv) => parseRunArgs(["agent.ts", ...flags], env).store,
  train: (flags: string[], env: NodeJS.ProcessEnv) => parseTrainArgs(["agent.ts", ...flags], env).store,
  apo: (flags: string[], env: NodeJS.ProcessEnv) => {
    const { store } = parseApoArgs([...apo, ...flags], env);
    return store.kind === "url" ? store.connection : {};
  },
};

describe.each(Object.entries(commands))("agl %s --store", (_name, storeOf) => {
  it("takes --store and --token, the token also from $AGL_TOKEN", () => {
    expect(storeOf(["--store", "https://s:1", "--token", "t"], {})).toEqual({ baseUrl: "https://s:1", token: "t" });
    expect(storeOf(["--store", "http://s:1"], { AGL_TOKEN: "env" })).toEqual({ baseUrl: "http://s:1", token: "env" });
  });

  it("refuses what is not an http(s) URL, with the same message", () => {
    for (const bad of ["s:1", "ftp://s", "nonsense"]) {
      expect(() => storeOf(["--store", bad], {})).toThrow(UsageError);
      expect(() => storeOf(["--store", bad], {})).toThrow(`--store must be an http(s) URL, got "${bad}"`);
    }
  });
});

describe("without --store", () => {
  it("agl proxy refuses to run; agl run takes $AGL_STORE_URL, else the local store; train and apo start their own", () => {
    expect(() => parseProxyArgs([], {})).toThrow("--store is required");
    expect(commands.run([], { AGL_STORE_URL: "http://far:9" })).toEqual({ baseUrl: "http://far:9" });
    expect(commands.run([], {})).toEqual({ baseUrl: "http://127.0.0.1:4747" });
    expect(() => commands.run([], { AGL_STORE_URL: "far:9" })).toThrow('AGL_STORE_URL must be an http(s) URL, got "far:9"');
    expect(commands.train([], { AGL_TOKEN: "t" })).toEqual({ token: "t" });
    expect(parseApoArgs(apo, {}).store).toEqual({ kind: "memory" });
  });
});

describe("storeConnectionArgv", () => {
  it("gives back flags that parse to the same connection", () => {
    const connection = { baseUrl: "http://s:1", token: "t" };
    expect(parseStoreConnection({ store: "http://s:1", token: "t" }, {}, "required")).toEqual(connection);
    expect(parseProxyArgs(storeConnectionArgv(connection), {}).store).toEqual(connection);
    expect(storeConnectionArgv({})).toEqual([]);
  });
});

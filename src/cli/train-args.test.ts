import { describe, expect, it } from "vitest";
import { UsageError } from "./flags.js";
import { parseTrainArgs } from "./train-args.js";

describe("parseTrainArgs", () => {
  it("defaults to the local trainer and passes what follows -- to the trainer", () => {
    const args = parseTrainArgs(["agent.ts", "--steps", "5", "--", "--lr", "0.01"], {}, "py");
    expect(args).toMatchObject({
      agentModule: "agent.ts",
      trainer: "local",
      steps: 5,
      database: "./agl-train.db",
      workers: 1,
      concurrency: 64,
      python: "py",
      trainerArgs: ["--lr", "0.01"],
    });
    expect(args.store.baseUrl).toBeUndefined();
  });

  it("takes a validation dataset", () => {
    expect(parseTrainArgs(["a.ts", "--val-dataset", "val.jsonl"]).valDataset).toBe("val.jsonl");
    expect(parseTrainArgs(["a.ts"]).valDataset).toBeUndefined();
  });

  it("takes the token and python from the environment", () => {
    const args = parseTrainArgs(["a.ts"], { AGL_TOKEN: "t", AGL_PYTHON: "/venv/python" });
    expect(args.store.token).toBe("t");
    expect(args.python).toBe("/venv/python");
  });

  it("rejects bad input", () => {
    expect(() => parseTrainArgs([])).toThrow(UsageError);
    expect(() => parseTrainArgs(["a.ts", "--trainer", "tf"])).toThrow(/local or verl/);
    expect(() => parseTrainArgs(["a.ts", "--trainer", "verl"])).toThrow(/needs --dataset/);
    expect(() => parseTrainArgs(["a.ts", "--steps", "0"])).toThrow(/integer/);
    expect(() => parseTrainArgs(["a.ts", "--bogus"])).toThrow(UsageError);
  });

  it("answers --help without an agent", () => {
    expect(parseTrainArgs(["--help"]).help).toBe(true);
  });
});

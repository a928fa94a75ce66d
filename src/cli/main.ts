import { APO_USAGE, parseApoArgs } from "./apo-args.js";
import { apo } from "./apo.js";
import { PROXY_USAGE, parseProxyArgs } from "./proxy-args.js";
import { runProxy } from "./proxy.js";
import { UsageError } from "./flags.js";
import { SERVE_USAGE, parseServeArgs } from "./serve-args.js";
import { serve } from "./serve.js";
import { parseRunArgs, RUN_USAGE } from "./run-args.js";
import { runAgent } from "./run.js";
import { parseTrainArgs, TRAIN_USAGE } from "./train-args.js";
import { defaultPython, train } from "./train.js";

const USAGE = `Usage: agl <command> [options]

Commands:
  serve    run the store server (agl serve --help for its options)
  run      run an agent against a store (agl run --help for its options)
  apo      optimize an agent's prompt templates (agl apo --help)
  proxy    run the LLM proxy on its own port (agl proxy --help)
  train    train the model an agent calls by RL: store, proxy, runners and trainer (agl train --help)
`;

/** Runs the `agl` command line; resolves to the exit code (0 ok, 1 failure, 2 usage error). */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case "serve": {
        const args = parseServeArgs(rest);
        if (args.help) {
          process.stdout.write(SERVE_USAGE);
          return 0;
        }
        return await serve(args);
      }
      case "proxy": {
        const args = parseProxyArgs(rest);
        if (args.help) {
          process.stdout.write(PROXY_USAGE);
          return 0;
        }
        return await runProxy(args);
      }
      case "apo": {
        const args = parseApoArgs(rest);
        if (args.help) {
          process.stdout.write(APO_USAGE);
          return 0;
        }
        return await apo(args);
      }
      case "run": {
        const args = parseRunArgs(rest);
        if (args.help) {
          process.stdout.write(RUN_USAGE);
          return 0;
        }
        return await runAgent(args);
      }
      case "train": {
        const args = parseTrainArgs(rest, process.env, defaultPython());
        if (args.help) {
          process.stdout.write(TRAIN_USAGE);
          return 0;
        }
        return await train(args);
      }
      case undefined:
      case "help":
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      const help = ["serve", "proxy", "apo", "run", "train"].includes(command ?? "") ? `agl ${command} --help` : "agl --help";
      process.stderr.write(`agl: ${error.message}\nRun '${help}' for usage.\n`);
      return 2;
    }
    process.stderr.write(`agl: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

process.exit(await main(process.argv.slice(2)));

import { SERVE_USAGE, UsageError, parseServeArgs } from "./serve-args.js";
import { serve } from "./serve.js";

const USAGE = `Usage: agl <command> [options]

Commands:
  serve    run the store server (agl serve --help for its options)
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
      process.stderr.write(`agl: ${error.message}\nRun 'agl ${command === "serve" ? "serve " : ""}--help' for usage.\n`);
      return 2;
    }
    process.stderr.write(`agl: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

process.exit(await main(process.argv.slice(2)));

import { readFileSync } from "node:fs";
import { parseTokenFile, parseTokenSpec, type ScopedToken } from "../core/credentials.js";
import { UsageError } from "./flags.js";

/** The flags of a server's accepted tokens: `--token [SCOPE=]TOKEN` (repeatable) and `--token-file FILE`. */
export const TOKEN_FLAGS = {
  token: { type: "string", multiple: true },
  "token-file": { type: "string" },
} as const;

export const TOKEN_USAGE = `  --token [<scope>=]<token>   accept this bearer token, of scope runner, trainer, reader or admin (repeatable;
                              without a scope: admin; default: $AGL_TOKEN as admin, else no token needed)
  --token-file <file>         accept the tokens of this file, one 'scope:token' a line (# comments)
`;

/** The tokens a server accepts, from {@link TOKEN_FLAGS} (then `$AGL_TOKEN`, as admin); undefined: none needed. */
export function acceptedTokens(
  values: { token?: string[] | undefined; "token-file"?: string | undefined },
  env: NodeJS.ProcessEnv,
): ScopedToken[] | undefined {
  const tokens = (values.token ?? []).map(parseTokenSpec);
  const file = values["token-file"];
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new UsageError(`--token-file: cannot read ${file}: ${(error as Error).message}`);
    }
    try {
      tokens.push(...parseTokenFile(text, file));
    } catch (error) {
      throw new UsageError(`--token-file: ${(error as Error).message}`);
    }
  }
  const empty = tokens.find((t) => t.token === "");
  if (empty) throw new UsageError(`--token: the ${empty.scope} token is empty`);
  if (tokens.length === 0 && env.AGL_TOKEN) tokens.push({ scope: "admin", token: env.AGL_TOKEN });
  return tokens.length === 0 ? undefined : tokens;
}

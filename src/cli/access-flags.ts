import { readFileSync } from "node:fs";
import { parseTokenFile, parseTokenSpec, type ScopedToken } from "../core/credentials.js";
import type { TlsFiles } from "../core/tls.js";
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

/** A server's TLS flags: `--tls-cert`, `--tls-key`, and `--tls-client-ca` for mutual TLS. */
export const SERVER_TLS_FLAGS = {
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-client-ca": { type: "string" },
} as const;

export const SERVER_TLS_USAGE = `  --tls-cert <file>           PEM certificate chain; serve TLS (needs --tls-key)
  --tls-key <file>            PEM private key
  --tls-client-ca <file>      mutual TLS: require client certificates signed by this CA
`;

/** The server TLS files of {@link SERVER_TLS_FLAGS}; undefined without `--tls-cert`. Throws {@link UsageError}. */
export function serverTlsFiles(values: Record<string, unknown>): TlsFiles | undefined {
  const [certFile, keyFile, caFile] = ["tls-cert", "tls-key", "tls-client-ca"].map((k) => values[k] as string | undefined);
  if ((certFile === undefined) !== (keyFile === undefined)) throw new UsageError("--tls-cert and --tls-key go together");
  if (caFile !== undefined && certFile === undefined) throw new UsageError("--tls-client-ca needs --tls-cert and --tls-key");
  return certFile === undefined ? undefined : { certFile, keyFile, ...(caFile === undefined ? {} : { caFile }) };
}

export const ADVERTISE_USAGE = `  --advertise <url>           the URL consumers on other hosts reach this server at (printed, for publishing)
`;

/**
 * Says where consumers reach a server: the `--advertise` URL on stdout when given; a loud warning on stderr when it
 * listens on a wildcard address, which other hosts cannot dial as such.
 */
export function reportAdvertised(what: string, listening: string, advertise: string | undefined): void {
  if (advertise !== undefined) return void process.stdout.write(`${what} advertised as ${advertise}\n`);
  const host = new URL(listening).hostname.replace(/^\[|\]$/g, "");
  if (host === "0.0.0.0" || host === "::") {
    process.stderr.write(
      `${what}: WARNING: listening on the wildcard address ${host}, which consumers cannot dial as such; pass ` +
        "--advertise <url> with an address of this host they reach, and publish that\n",
    );
  }
}

import { readFileSync } from "node:fs";
import * as nodeTls from "node:tls";

/** A server's TLS: PEM certificate chain and key; with `ca`, clients must present a certificate that CA signed. */
export interface ServerTls {
  cert: string | Buffer;
  key: string | Buffer;
  ca?: string | Buffer;
}

/** A client's TLS: the CA it verifies servers against (default: the system's), and its own certificate for mutual TLS. */
export interface ClientTls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** Paths of PEM files, as the CLI flags give them. */
export interface TlsFiles {
  /** Server: `--tls-cert`; client: `--client-cert`. */
  certFile?: string;
  keyFile?: string;
  /** Server: `--tls-client-ca` (mutual TLS); client: `--ca-file`. */
  caFile?: string;
}

const read = (path: string, what: string) => {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(`cannot read the ${what} ${path}: ${(error as Error).message}`);
  }
};

/** Reads a server's certificate, key and (for mutual TLS) client CA; undefined without a certificate. */
export function readServerTls(files: TlsFiles): ServerTls | undefined {
  if (files.certFile === undefined || files.keyFile === undefined) return undefined;
  return {
    cert: read(files.certFile, "certificate"),
    key: read(files.keyFile, "private key"),
    ...(files.caFile === undefined ? {} : { ca: read(files.caFile, "client CA file") }),
  };
}

/** Reads a client's CA and certificate files; undefined when none is given. */
export function readClientTls(files: TlsFiles): ClientTls | undefined {
  if (files.caFile === undefined && files.certFile === undefined) return undefined;
  return {
    ...(files.caFile === undefined ? {} : { ca: read(files.caFile, "CA file") }),
    ...(files.certFile === undefined ? {} : { cert: read(files.certFile, "client certificate") }),
    ...(files.keyFile === undefined ? {} : { key: read(files.keyFile, "client key") }),
  };
}

/**
 * Adds the PEM CA of `$AGL_CA_FILE` to this thread's default trust, so an agent's own HTTPS calls (its OpenAI client
 * calling the LLM proxy) verify servers as agl's clients do. Each worker thread calls it too: the default is per thread.
 */
export function trustCaFileFromEnv(env: NodeJS.ProcessEnv = process.env): void {
  const file = env.AGL_CA_FILE;
  if (!file) return;
  const ca = read(file, "CA file").toString("utf8");
  nodeTls.setDefaultCACertificates([...nodeTls.getCACertificates("default"), ca]);
}

/**
 * A throwaway certificate authority for TLS tests, made with the machine's openssl: a CA, certificates it signs for
 * servers (for the addresses given) and for clients (mutual TLS). EC keys: quick to make.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";

export interface TestCa {
  /** The CA's certificate: what clients and mutual-TLS servers verify against. */
  readonly caFile: string;
  /** Signs a certificate for a server reachable at `altNames` (openssl's subjectAltName syntax). */
  server(name: string, altNames: string): { cert: string; key: string };
  /** Signs a client certificate (for mutual TLS). */
  client(name: string): { cert: string; key: string };
}

const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });

/** Makes a CA in `dir` (valid for a day). */
export function createTestCa(dir: string): TestCa {
  const caFile = join(dir, "ca.pem");
  const caKey = join(dir, "ca-key.pem");
  const ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl("req", "-x509", ...ecKey, "-days", "1", "-subj", "/CN=agl test CA", "-keyout", caKey, "-out", caFile);
  const sign = (name: string, extensions: string) => {
    const files = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}-key.pem`) };
    const csr = join(dir, `${name}.csr`);
    const ext = join(dir, `${name}.ext`);
    execFileSync("sh", ["-c", `printf '%s\\n' "$1" > "$2"`, "sh", extensions, ext]);
    openssl("req", "-new", ...ecKey, "-subj", `/CN=${name}`, "-keyout", files.key, "-out", csr);
    openssl(
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      caFile,
      "-CAkey",
      caKey,
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      ext,
      "-out",
      files.cert,
    );
    return files;
  };
  return {
    caFile,
    server: (name, altNames) => sign(name, `subjectAltName=${altNames}\nextendedKeyUsage=serverAuth`),
    client: (name) => sign(name, "extendedKeyUsage=clientAuth"),
  };
}

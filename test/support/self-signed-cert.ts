/** A throwaway self-signed certificate for TLS tests, made with the machine's openssl. */
import { execFileSync } from "node:child_process";
import { join } from "node:path";

export interface CertFiles {
  cert: string;
  key: string;
}

/** Writes `cert.pem` and `key.pem` into `dir`, valid for a day, for `altNames` (openssl's subjectAltName syntax). */
export function writeSelfSignedCert(dir: string, altNames = "DNS:localhost,IP:127.0.0.1"): CertFiles {
  const files = { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      `subjectAltName=${altNames}`,
      "-keyout",
      files.key,
      "-out",
      files.cert,
    ],
    { stdio: "ignore" },
  );
  return files;
}

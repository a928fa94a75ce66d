import { Metadata } from "@grpc/grpc-js";

/** Converts grpc-js metadata to fetch `Headers`, with binary (`-bin`) values base64-encoded as connect does. */
export function metadataToHeaders(metadata: Metadata): Headers {
  const headers = new Headers();
  for (const [key, values] of Object.entries(metadata.toJSON())) {
    for (const value of values) {
      headers.append(key, typeof value === "string" ? value : Buffer.from(value).toString("base64"));
    }
  }
  return headers;
}

/** Converts `Headers` to grpc-js metadata; values of `-bin` keys are decoded from base64. Invalid entries are dropped. */
export function headersToMetadata(...sources: Headers[]): Metadata {
  const metadata = new Metadata();
  for (const headers of sources) {
    headers.forEach((value, key) => {
      try {
        if (key.endsWith("-bin")) {
          for (const part of value.split(",")) metadata.add(key, Buffer.from(part.trim(), "base64"));
        } else {
          metadata.add(key, value);
        }
      } catch {
        // grpc-js rejects keys that are not legal metadata keys; such a header cannot be sent over gRPC.
      }
    });
  }
  return metadata;
}

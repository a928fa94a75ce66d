/**
 * `text` with every lone UTF-16 surrogate replaced by U+FFFD (what `String.prototype.toWellFormed` does, ES2024).
 * Status messages travel percent-encoded in gRPC trailers, and `encodeURI`/`encodeURIComponent` throw on a lone
 * surrogate — which a client can smuggle into a message through JSON (`"\ud800"`), or a parser error can quote.
 */
export function wellFormed(text: string): string {
  return text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

import type * as http from "node:http";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { consoleLogger, type ServerLogger } from "./error-logging.js";
import type { HttpFallback } from "./http-handler.js";
import { compressible, contentTypeOf, defaultUiDir, findUiFile, relativeUiPath, type UiFile, uiBuilt } from "./ui-files.js";

/** Options of {@link createUiHandler}. */
export interface UiHandlerOptions {
  /** The built dashboard (index.html and its assets). Default: `dist/ui/` of the agl package ({@link defaultUiDir}). */
  dir?: string;
  /** Requests that are not the dashboard's (other methods, the LLM proxy's and OTLP paths). Default: 404. */
  next?: HttpFallback;
  /** Where a failure to serve a file is reported (default: stderr). */
  logger?: ServerLogger;
}

/**
 * The dashboard's content security policy: scripts, styles and data only from this origin (the store's own port), no
 * inline script, no framing, no plugins.
 */
export const UI_CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const securityHeaders = {
  "content-security-policy": UI_CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

/**
 * Paths the dashboard never answers, even when nothing else does: RPCs (`/package.Service/Method`), the LLM proxy
 * (`/v1/…`, `/rollout/…`, `/proxy/…`) and the health probe.
 */
const reserved = /^(\/[^/]*\.[^/]*\/|\/v1(\/|$)|\/rollout\/|\/proxy\/|\/healthz$)/;

/** Compressed bodies, by file and version; the dashboard is a few files that never change while it is served. */
const maxCompressedBytes = 8 * 1024 * 1024;
const gzipAsync = promisify(gzip);

/**
 * Serves the built dashboard on GET and HEAD: its files, and index.html for the client's routes (paths whose last
 * segment has no extension). Files need no token: they hold no data, which the app reads through the token-checked
 * RPCs. Files under `assets/` (content-hashed by the build) are cached for good; everything else is revalidated by
 * ETag. When the dashboard is not built, its paths answer 503 with a page that says how to build it.
 */
export function createUiHandler(options: UiHandlerOptions = {}): HttpFallback {
  const root = options.dir ?? defaultUiDir();
  const next = options.next ?? notFound;
  const gzipped = new Map<string, Promise<Buffer>>();

  const compressed = (file: UiFile, body: Buffer) => {
    const key = `${file.path}\0${file.size}\0${file.mtimeMs}`;
    let entry = gzipped.get(key);
    if (!entry) {
      entry = gzipAsync(body);
      gzipped.set(key, entry);
    }
    return entry;
  };

  async function serve(req: http.IncomingMessage, res: http.ServerResponse, urlPath: string): Promise<void> {
    const relative = relativeUiPath(urlPath);
    if (relative === undefined) return page(res, 404, "Not found", "There is no such page.");
    let file = await findUiFile(root, relative || "index.html");
    const clientRoute = !/\.[^/]*$/.test(relative);
    if (!file && clientRoute) file = await findUiFile(root, "index.html");
    if (!file) {
      if (await uiBuilt(root)) return page(res, 404, "Not found", "There is no such file in the dashboard.");
      return page(
        res,
        503,
        "The dashboard is not built",
        "This agl installation has no built dashboard. In a checkout, run <code>make build</code> (it builds <code>ui/</code> " +
          "into <code>dist/ui/</code>) and restart <code>agl serve</code>; start it with <code>--no-ui</code> to serve the store alone.",
      );
    }
    const type = contentTypeOf(file.path);
    const etag = `W/"${file.size.toString(16)}-${Math.floor(file.mtimeMs).toString(16)}"`;
    const headers: http.OutgoingHttpHeaders = {
      ...securityHeaders,
      "content-type": type,
      etag,
      "cache-control": relative.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache",
      vary: "accept-encoding",
    };
    if (ifNoneMatch(req.headers["if-none-match"], etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    let body: Buffer = await readFile(file.path);
    if (compressible(type) && body.length >= 1024 && body.length <= maxCompressedBytes && acceptsGzip(req)) {
      body = await compressed(file, body);
      headers["content-encoding"] = "gzip";
    }
    headers["content-length"] = body.length;
    res.writeHead(200, headers);
    res.end(req.method === "HEAD" ? undefined : body);
  }

  return (req, res) => {
    const urlPath = (req.url ?? "/").split("?", 1)[0] as string;
    if ((req.method !== "GET" && req.method !== "HEAD") || reserved.test(urlPath)) return next(req, res);
    serve(req, res, urlPath).catch((error: unknown) => {
      (options.logger ?? consoleLogger).error("serving the dashboard failed:", error);
      if (res.headersSent) res.destroy();
      else page(res, 500, "Internal error", "The dashboard could not be served; the server's log says why.");
    });
  };
}

function ifNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(",").some((tag) => tag.trim() === etag || tag.trim() === "*");
}

/** Whether the client takes gzip: listed (or `*`) without `q=0`. */
function acceptsGzip(req: http.IncomingMessage): boolean {
  return String(req.headers["accept-encoding"] ?? "")
    .split(",")
    .some((entry) => {
      const [name, ...params] = entry.split(";").map((part) => part.trim().toLowerCase());
      const q = params.find((p) => p.startsWith("q="));
      return (name === "gzip" || name === "*") && (q === undefined || Number(q.slice(2)) > 0);
    });
}

/** A small HTML page (no script, no style: the policy allows neither inline). */
function page(res: http.ServerResponse, status: number, title: string, html: string): void {
  const body = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${title} · agl</title></head>\n<body><h1>${title}</h1><p>${html}</p></body></html>\n`;
  res.writeHead(status, {
    ...securityHeaders,
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
  });
  res.end(res.req?.method === "HEAD" ? undefined : body);
}

function notFound(_req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(404, { "content-type": "application/json" });
  res.end(JSON.stringify({ code: "not_found", message: "no such route" }));
}

import { realpath, stat } from "node:fs/promises";
import { extname, join, posix, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The files of the built dashboard: where they are, which request path names which file (never one outside the
 * directory), and how each is typed.
 */

/**
 * `dist/ui/` at the package root, where `make build` puts the dashboard built from `ui/`. This module sits two levels
 * below the root both as source (`src/server/`) and compiled (`dist/server/`), so one relative path serves both.
 */
export const defaultUiDir = (): string => fileURLToPath(new URL("../../dist/ui/", import.meta.url));

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
  ".wasm": "application/wasm",
};

/** The content type of a file by its extension; unknown ones are opaque bytes (never sniffed: see nosniff). */
export const contentTypeOf = (path: string): string => contentTypes[extname(path).toLowerCase()] ?? "application/octet-stream";

/** Whether a response of this type is worth compressing. */
export const compressible = (type: string): boolean => /^(text\/|application\/(json|wasm)|image\/svg)/.test(type);

/** A file found for a request. */
export interface UiFile {
  path: string;
  size: number;
  mtimeMs: number;
}

/**
 * The request path as a path relative to the UI directory, or undefined when it cannot name a file there: not
 * percent-decodable, a NUL byte, a backslash, or a `..` segment (before or after decoding). "" is the root.
 */
export function relativeUiPath(urlPath: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (!decoded.startsWith("/") || decoded.includes("\0") || decoded.includes("\\")) return undefined;
  const segments = decoded.split("/");
  if (segments.some((s) => s === "..")) return undefined;
  return posix.normalize(decoded).replace(/^\/+/, "");
}

/**
 * The regular file `relative` names inside `root` (symbolic links followed, but only to files that are inside the
 * directory too), or undefined.
 */
export async function findUiFile(root: string, relative: string): Promise<UiFile | undefined> {
  try {
    const realRoot = await realpath(root);
    const real = await realpath(join(realRoot, relative));
    if (real !== realRoot && !real.startsWith(realRoot + sep)) return undefined;
    const info = await stat(real);
    return info.isFile() ? { path: real, size: info.size, mtimeMs: info.mtimeMs } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the built dashboard is there (its index.html). */
export async function uiBuilt(root: string): Promise<boolean> {
  return (await findUiFile(root, "index.html")) !== undefined;
}

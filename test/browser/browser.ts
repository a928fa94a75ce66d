/**
 * Debian's Chromium driven by playwright-core, for the dashboard's browser tests and bench. The browser is never
 * downloaded: `scripts/chromium.sh` installs Debian's package (`make test` runs it first) and names the executable.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { repo } from "../apo/agl-cli.js";

/** Where screenshots go (gitignored). */
export const artifactsDir = join(repo, "test-artifacts", "ui");

/** The Chromium executable: $AGL_CHROMIUM, else what `scripts/chromium.sh path` finds. */
export function chromiumPath(): string {
  if (process.env.AGL_CHROMIUM) return process.env.AGL_CHROMIUM;
  try {
    return execFileSync(join(repo, "scripts/chromium.sh"), ["path"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch {
    throw new Error("Chromium is not installed: run scripts/chromium.sh (make test does), or set AGL_CHROMIUM");
  }
}

/** A headless Chromium. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath(), headless: true });
}

/** A new page of a fixed size (screenshots comparable from run to run), with short timeouts. */
export async function newPage(browser: Browser, timeoutMs = 10_000): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(timeoutMs);
  return page;
}

/** Writes a full-page screenshot to test-artifacts/ui/NAME.png; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(artifactsDir, { recursive: true });
  const path = join(artifactsDir, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Debian's chromium for the browser test of the web view (docs/serve.md, "Web view"),
 * installed like the servers: apt-get only when the binary is missing. The test drives it
 * with puppeteer-core, which downloads no browser.
 */
import { aptInstall } from './harness.js';

/** Where Debian puts it. */
export const CHROMIUM = '/usr/bin/chromium';

/** Install chromium when missing; resolves its path. */
export async function ensureChromium(): Promise<string> {
  await aptInstall(CHROMIUM, ['chromium']);
  return CHROMIUM;
}

/**
 * Debian's Go toolchain for the Go example of docs/serve.md ("Other languages"), installed
 * like the servers and chromium: apt-get only when the binary is missing.
 */
import { aptInstall } from './harness.js';

/** Where Debian puts it. */
export const GO = '/usr/bin/go';

/** Install golang-go when missing; resolves the `go` binary's path. */
export async function ensureGo(): Promise<string> {
  await aptInstall(GO, ['golang-go']);
  return GO;
}

/**
 * Which backend a command uses, and how its URL is shown. `run`, `status` and `migrate`
 * default to the embedded `file://` backend (locks between the processes of this machine,
 * as flock); they use memory:// only when asked, since memory:// coordinates nothing
 * between processes.
 */
import { encodeHostList, redact, secretsOf } from '../backends/kit.js';

/** The backend of `run` and `status` without --backend or LOCKSMITH_BACKEND: file:// in its default directory. */
export const DEFAULT_BACKEND = 'file://';

/** The backend URL a command uses: --backend (commander has already read LOCKSMITH_BACKEND into it), else {@link DEFAULT_BACKEND}. */
export function chooseBackend(given: string | undefined): string {
  return given === undefined || given.trim() === '' ? DEFAULT_BACKEND : given;
}

/** The URL as locksmith prints it: password and secret-like parameters as `***`; as given when it has none. */
export function shownUrl(url: string): string {
  try {
    if (secretsOf(new URL(encodeHostList(url))).length === 0) return url;
  } catch {
    // Not a URL: redact() hides anything that looks like a password in it.
  }
  return redact(url);
}

/**
 * What an engine declares about itself, in one place: `src/backends/<engine>/manifest.ts`.
 * `connect.ts` reads the schemes, the loader and the driver; the package test checks that
 * package.json (its `exports` subpath, the driver as an optional peer, the `test:<engine>`
 * script), the server script, the fault profiles and the docs page agree with it. See
 * docs/architecture.md, "Adding an engine".
 *
 * A manifest must not import its engine or its driver: `createLocker('redis://…')` loads
 * every manifest, and only the engine of the URL it was given.
 */
import type { BackendFactory } from '../backend.js';

/** One engine's entry. */
export interface EngineManifest {
  /**
   * The engine's name: its folder `src/backends/<name>/`, its package subpath
   * `locksmith-dlm/<name>` and its docs page `docs/backends/<name>.md`.
   */
  readonly name: string;
  /** The URL schemes it serves, without the colon (`['postgres', 'postgresql']`). */
  readonly schemes: readonly string[];
  /** The npm package of its driver, an optional peer dependency (none for an in-process engine). */
  readonly driver?: string;
  /** The engine module, imported only when a URL of one of its schemes is connected. */
  readonly load: () => Promise<{ readonly createBackend: BackendFactory }>;
  /** The npm script that runs its conformance file (`test/conformance/<name>.test.ts`) and its own tests. */
  readonly testScript: string;
  /** The modules under `scripts/servers/` that start it for tests and benchmarks (none: in-process). */
  readonly servers: readonly string[];
  /** Its profiles in `test/faults/profiles.ts`, each with a `test/faults/<profile>.test.ts` (none: not under the nemesis). */
  readonly faultProfiles: readonly string[];
  /** The npm script of its benchmark, if it has one. */
  readonly benchScript?: string;
}

/** The docs page of an engine (repository-relative). */
export const docsPageOf = (m: Pick<EngineManifest, 'name'>): string => `docs/backends/${m.name}.md`;

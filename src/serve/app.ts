/**
 * The service as a Fastify instance over one locker (docs/serve.md). It keeps no lock
 * state of its own: sessions and holds are records in the backend (sessions.ts), so any
 * number of replicas over one backend are one service.
 */
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { Access, RateLimit, type Need } from './auth.js';
import type { Backend } from '../backend.js';
import { createLocker, type Locker } from '../locker.js';
import { validateDuration } from '../options.js';
import { routedBackend } from './records.js';
import { errorHandler } from './errors.js';
import { VIEW_HTML } from './view.js';
import { eventRoutes, type StreamOptions } from './events.js';
import { electionRoutes } from './elections.js';
import { historyRoutes } from './history.js';
import { Holds } from './holds.js';
import { OpenApi } from './openapi.js';
import { adminRoutes, lockRoutes, OPEN, READ, sessionRoutes, type RouteDeps } from './routes.js';
import { healthz, MAX_SERVE_LOCK_ID_BYTES } from './schemas.js';
import { ServeError, Sessions } from './sessions.js';

/** Limits of one replica (docs/serve.md, "Limits"). */
export interface ServeLimits {
  /** Largest request body in bytes. @default 16384 */
  readonly bodyBytes: number;
  /** Waits (long polls) one session may have at once on a replica. @default 64 */
  readonly waitsPerSession: number;
  /** Live sessions one token may have (counted over every replica). @default 1000 */
  readonly sessionsPerToken: number;
  /** Requests per second one token may make on a replica (a bucket of as many). @default 200 */
  readonly requestsPerSecond: number;
}

/** Options of {@link buildServer}. */
export interface ServeOptions {
  /** The locker whose backend the service runs over (the service does not close it). */
  readonly locker: Locker;
  /**
   * A locker over the same store under another namespace, for the service's own records
   * (sessions, hold markers), so that watchers of the locks hear nothing of them: the CLI
   * opens one at `recordsUrl` (records.ts) where the engine has one change channel per key prefix
   * (docs/serve.md, "Design"). Without it the records are kept beside the locks under the
   * reserved prefix. The service does not close it.
   */
  readonly records?: Locker;
  readonly limits?: Partial<ServeLimits>;
  /** The tokens file's text (auth.ts); without it every route but /healthz answers 401, unless `insecure`. */
  readonly tokens?: string;
  /** Serve HTTPS with this certificate and key (PEM). */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** No credentials checked at all (the CLI allows it on a loopback address only). @default false */
  readonly insecure?: boolean;
  /** Fastify's logger option (false: silent). */
  readonly logger?: FastifyServerOptions['logger'];
  /** Polling period of `/v1/events` on backends that are not notified (ms). @default 1000 */
  readonly watchEveryMs?: number;
  /** `/v1/events`: each stream's unsent-bytes bound and the state streams' period (docs/serve.md, "Events"). */
  readonly streams?: Partial<StreamOptions>;
  /** The version shown in the OpenAPI document. */
  readonly version?: string;
  /** How long a hold's marker lives; a keepalive rolls it in its second half (docs/serve.md, "Design"). @default 3600000 */
  readonly markerTtlMs?: number;
}

/** Defaults of {@link ServeLimits}. */
export const DEFAULT_LIMITS: ServeLimits = Object.freeze({
  bodyBytes: 16_384,
  waitsPerSession: 64,
  sessionsPerToken: 1_000,
  requestsPerSecond: 200,
});

/** Build the service (routes registered, not listening). */
export async function buildServer(options: ServeOptions): Promise<FastifyInstance> {
  // Checked before anything is opened: a bad value is the caller's typed error, not a half-built server.
  const markerTtlMs = options.markerTtlMs === undefined ? undefined : validateDuration(options.markerTtlMs, 'markerTtlMs');
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const backend = await options.locker.backend();
  const app = Fastify({
    // Typed as the plain HTTP instance: the routes use nothing that differs under HTTPS.
    ...(options.tls ? { https: { cert: options.tls.cert, key: options.tls.key } } : {}),
    logger: options.logger ?? false,
    bodyLimit: limits.bodyBytes,
    // Strict bodies: an unknown field is an error (never silently dropped), no type coercion.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
    forceCloseConnections: true,
    // A lock id of MAX_SERVE_LOCK_ID_BYTES, URL-encoded (3 chars a byte), reaches the schema's check.
    routerOptions: { maxParamLength: 4 * MAX_SERVE_LOCK_ID_BYTES },
  });
  // A bodiless POST or DELETE sent with `content-type: application/json` (many clients add it
  // to every request) is no error; a body is parsed as Fastify does (prototype poisoning refused).
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') done(null, undefined);
    else json(request, body as string, done);
  });
  const openapi = new OpenApi();
  app.addHook('onRoute', (route) => openapi.add(route));
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((request, reply) => {
    void reply.status(404).send({ code: 'NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0] ?? ''}` });
  });
  const store = options.records ? await recordStore(options.locker, backend, options.records) : options.locker;
  if (store !== options.locker) app.addHook('onClose', () => store.close());
  const sessions = new Sessions(store, await store.backend(), markerTtlMs);
  const holds = new Holds(backend, sessions, limits.waitsPerSession);
  // The replica's background work (write-downs, intents' idle removals) ends with it.
  app.addHook('onClose', async () => {
    holds.close();
    sessions.close();
  });
  const clients = guard(app, new Access(options.tokens, options.insecure ?? false), new RateLimit(limits.requestsPerSecond));
  const deps: RouteDeps = {
    locker: options.locker,
    sessions,
    holds,
    clientOf: (request) => clients.get(request),
    onSession: async (client) => {
      if (client !== undefined && (await sessions.count(client)) >= limits.sessionsPerToken) {
        throw new ServeError(429, 'LIMIT_EXCEEDED', `token '${client}' already has ${limits.sessionsPerToken} sessions`);
      }
    },
  };
  app.get('/healthz', { schema: healthz, config: OPEN }, async () => ({ ok: true, backend: backend.name }));
  sessionRoutes(app, deps);
  lockRoutes(app, deps);
  adminRoutes(app, deps);
  eventRoutes(app, options.locker, options.watchEveryMs ?? 1_000, options.streams);
  electionRoutes(app, deps, options.watchEveryMs ?? 1_000);
  historyRoutes(app, options.locker, options.watchEveryMs ?? 1_000);
  app.get('/', { config: OPEN }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(VIEW_HTML),
  );
  app.get('/openapi.json', { config: READ }, async () => openapi.document(options.version ?? '0'));
  return app;
}

/** A locker whose records go to `records`'s backend, every other lock to `backend` (records.ts). */
async function recordStore(locker: Locker, backend: Backend, records: Locker): Promise<Locker> {
  return createLocker(routedBackend(backend, await records.backend()), locker.options);
}

/**
 * Check every request's credentials before its body is read (an unauthenticated request is
 * 401 whatever it sends); the client names are kept per request for the routes.
 */
function guard(app: FastifyInstance, access: Access, rate: RateLimit): WeakMap<FastifyRequest, string> {
  const clients = new WeakMap<FastifyRequest, string>();
  // Insecure local mode checks nothing and names no client: no hook on every request.
  if (!access.checks) return clients;
  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (request, _reply, done) => {
    try {
      const need = (request.routeOptions.config as { need?: Need } | undefined)?.need ?? 'read';
      const client = access.check(request, need);
      if (client !== undefined) {
        rate.take(client);
        clients.set(request, client);
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  });
  return clients;
}

export { ServeError };

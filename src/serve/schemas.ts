/**
 * The JSON Schemas of every route: Fastify validates each request with them and
 * `GET /openapi.json` publishes the same objects (docs/serve.md, "API").
 */

/** Upper bound on a lock id through the service (UTF-8 bytes): its hold marker must fit a record. */
export const MAX_SERVE_LOCK_ID_BYTES = 256;
/** The longest wait one acquire may ask for (a long poll; clients loop for longer). */
export const MAX_WAIT_MS = 300_000;
/** Session ttl bounds. */
export const MIN_SESSION_TTL_MS = 1_000;
export const MAX_SESSION_TTL_MS = 3_600_000;

/** A session id in a body or a path. */
export const sessionId = { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$', description: 'a session id' } as const;
/** A fencing token as JSON carries it: a decimal string (a bigint has no JSON form). */
export const token = { type: 'string', pattern: '^[0-9]{1,20}$', description: 'a fencing token as a decimal string' } as const;

/** A `{ code, message }` error body. */
export const errorSchema = {
  type: 'object',
  properties: { code: { type: 'string' }, message: { type: 'string' } },
  required: ['code', 'message'],
} as const;

/** The error answers every route may give, as `{ code, message }`. */
export const errors = {
  400: errorSchema,
  401: errorSchema,
  403: errorSchema,
  404: errorSchema,
  409: errorSchema,
  429: errorSchema,
  503: errorSchema,
};

/** `:lockId` in a path (URL-encoded by the client; `/` as `%2F`). */
export const lockParams = {
  type: 'object',
  properties: { lockId: { type: 'string', minLength: 1, maxLength: MAX_SERVE_LOCK_ID_BYTES } },
  required: ['lockId'],
  additionalProperties: false,
} as const;

export const sessionParams = {
  type: 'object',
  properties: { id: sessionId },
  required: ['id'],
  additionalProperties: false,
} as const;

export const createSession = {
  summary: 'Open a session',
  tags: ['sessions'],
  body: {
    type: 'object',
    properties: {
      ttlMs: { type: 'integer', minimum: MIN_SESSION_TTL_MS, maximum: MAX_SESSION_TTL_MS },
      name: { type: 'string', minLength: 1, maxLength: 128 },
      meta: { type: 'object', maxProperties: 16 },
    },
    required: ['ttlMs'],
    additionalProperties: false,
  },
  response: {
    200: { type: 'object', properties: { id: sessionId, ttlMs: { type: 'integer' }, name: { type: 'string' } }, required: ['id', 'ttlMs'] },
    ...errors,
  },
} as const;

export const keepalive = {
  summary: "Renew the session and extend every hold by the session's ttl",
  tags: ['sessions'],
  params: sessionParams,
  response: {
    200: {
      type: 'object',
      properties: {
        id: sessionId,
        ttlMs: { type: 'integer' },
        holds: { type: 'integer' },
        lost: { type: 'array', items: { type: 'object', properties: { lockId: { type: 'string' }, token } } },
      },
    },
    ...errors,
  },
} as const;

export const deleteSession = {
  summary: 'Release every hold of the session and end it',
  tags: ['sessions'],
  params: sessionParams,
  response: { 200: { type: 'object', properties: { released: { type: 'integer' } } }, ...errors },
} as const;

const grant = {
  type: 'object',
  properties: {
    lockId: { type: 'string' },
    token,
    kind: { type: 'string' },
    session: sessionId,
    ttlMs: { type: 'integer' },
    leaseEndsAt: { type: 'integer', description: 'ms since the epoch (the replica clock)' },
    requestId: { type: 'string' },
  },
  required: ['lockId', 'token', 'kind', 'session', 'ttlMs', 'leaseEndsAt'],
} as const;

export const acquire = {
  summary: 'Acquire a lock for a session (a long poll of at most waitMs)',
  tags: ['locks'],
  params: lockParams,
  body: {
    type: 'object',
    properties: {
      session: sessionId,
      waitMs: { type: 'integer', minimum: 0, maximum: MAX_WAIT_MS },
      fair: { type: 'boolean' },
      kind: { type: 'string', enum: ['mutex', 'read', 'write', 'semaphore'] },
      permits: { type: 'integer', minimum: 1, maximum: 10_000 },
      requestId: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
    },
    required: ['session'],
    additionalProperties: false,
  },
  response: { 200: grant, ...errors },
} as const;

const holdBody = {
  type: 'object',
  properties: { session: sessionId, token },
  required: ['session', 'token'],
  additionalProperties: false,
} as const;

export const release = {
  summary: "Release the session's hold",
  tags: ['locks'],
  params: lockParams,
  body: holdBody,
  response: { 200: { type: 'object', properties: { released: { type: 'boolean' } } }, ...errors },
} as const;

export const extend = {
  summary: "Extend the session's hold by the session's ttl",
  tags: ['locks'],
  params: lockParams,
  body: holdBody,
  response: { 200: grant, ...errors },
} as const;

export const breakLock = {
  summary: 'Break the lock: end every hold as if its lease ran out, move the token on (admin)',
  tags: ['locks'],
  params: lockParams,
  body: {
    type: 'object',
    properties: { reason: { type: 'string', minLength: 1, maxLength: 512 } },
    required: ['reason'],
    additionalProperties: false,
  },
  response: { 200: { type: 'object', properties: { holds: { type: 'integer' } } }, ...errors },
} as const;

const lockInfo = {
  type: 'object',
  additionalProperties: true,
  description: 'holders and waiters, as locker.inspect() returns them',
} as const;

export const inspect = {
  summary: 'Holders and waiters of a lock',
  tags: ['locks'],
  params: lockParams,
  response: { 200: lockInfo, ...errors },
} as const;

export const list = {
  summary: 'One page of the locks under a prefix',
  tags: ['locks'],
  querystring: {
    type: 'object',
    properties: {
      prefix: { type: 'string', maxLength: 1024 },
      limit: { type: 'string', pattern: '^[0-9]{1,4}$' },
      cursor: { type: 'string', minLength: 1, maxLength: 8192 },
    },
    additionalProperties: false,
  },
  response: {
    200: { type: 'object', properties: { locks: { type: 'array', items: lockInfo }, cursor: { type: 'string' } }, required: ['locks'] },
    ...errors,
  },
} as const;

export const events = {
  summary: 'The changes of the locks under a prefix, as Server-Sent Events',
  tags: ['locks'],
  querystring: {
    type: 'object',
    properties: { prefix: { type: 'string', maxLength: 1024 } },
    additionalProperties: false,
  },
} as const;

export const healthz = {
  summary: 'Liveness',
  tags: ['service'],
  response: { 200: { type: 'object', properties: { ok: { type: 'boolean' }, backend: { type: 'string' } } } },
} as const;

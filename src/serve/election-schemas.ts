/**
 * The JSON Schemas of the election routes (docs/serve.md, "Elections"): Fastify validates
 * with them and `GET /openapi.json` publishes them, as schemas.ts does for the lock routes.
 */
import { errors, MAX_SERVE_LOCK_ID_BYTES, MAX_WAIT_MS, sessionId, token } from './schemas.js';

/** Longest participant value (UTF-8 bytes): with the session and request ids it stays an owner id. */
export const MAX_VALUE_BYTES = 128;

/** `:name` in a path: the election's lock id, URL-encoded. */
const nameParams = {
  type: 'object',
  properties: { name: { type: 'string', minLength: 1, maxLength: MAX_SERVE_LOCK_ID_BYTES } },
  required: ['name'],
  additionalProperties: false,
} as const;

/** Who leads, or null. */
const leader = {
  type: ['object', 'null'],
  properties: {
    value: { type: 'string', description: "the leader's participant value" },
    token: { ...token, description: "the fencing token of the leader's term" },
    session: { ...sessionId, description: 'the leading session, when a service session leads' },
    expiresInMs: { type: 'integer', description: 'lease left, when the backend tells it' },
  },
  required: ['value', 'token'],
} as const;

export const campaign = {
  summary: 'Campaign for leadership (a long poll of at most waitMs); the term lasts while the session is kept alive',
  tags: ['elections'],
  params: nameParams,
  body: {
    type: 'object',
    properties: {
      session: sessionId,
      value: { type: 'string', pattern: '^[^#\\u0000]{1,128}$', description: "shown by leader and observe (default: the session's name)" },
      waitMs: { type: 'integer', minimum: 0, maximum: MAX_WAIT_MS },
      requestId: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' },
    },
    required: ['session'],
    additionalProperties: false,
  },
  response: {
    200: {
      type: 'object',
      properties: {
        name: { type: 'string' },
        value: { type: 'string' },
        token,
        session: sessionId,
        ttlMs: { type: 'integer' },
        leaseEndsAt: { type: 'integer', description: 'ms since the epoch (the replica clock)' },
        requestId: { type: 'string' },
      },
      required: ['name', 'value', 'token', 'session', 'ttlMs', 'leaseEndsAt'],
    },
    ...errors,
  },
} as const;

export const resign = {
  summary: "Step down: release the session's leadership (idempotent)",
  tags: ['elections'],
  params: nameParams,
  body: {
    type: 'object',
    properties: { session: sessionId, token },
    required: ['session'],
    additionalProperties: false,
  },
  response: { 200: { type: 'object', properties: { resigned: { type: 'boolean' } }, required: ['resigned'] }, ...errors },
} as const;

export const leaderOf = {
  summary: 'Who leads the election now',
  tags: ['elections'],
  params: nameParams,
  response: { 200: { type: 'object', properties: { leader }, required: ['leader'] }, ...errors },
} as const;

export const observe = {
  summary: 'Leadership changes as Server-Sent Events (event "leader", data { leader })',
  tags: ['elections'],
  params: nameParams,
} as const;

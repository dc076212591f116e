/**
 * Every failure as `{ code, message }` with a status (docs/serve.md, "Errors"): the
 * library's codes for what the library says, a few service codes for the rest. Messages
 * are the errors' own, which never carry a credential; an unexpected error answers a fixed
 * text and is logged without the request's headers.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { LocksmithError } from '../errors.js';
import { ServeError } from './sessions.js';

const STATUS: Readonly<Record<string, number>> = {
  INVALID_ARGUMENT: 400,
  UNSUPPORTED: 400,
  LOCK_TIMEOUT: 409,
  LOCK_LOST: 409,
  LOCK_NOT_HELD: 409,
  BACKEND_UNAVAILABLE: 503,
  QUORUM_FAILED: 503,
  LOCKER_CLOSED: 503,
  DRIVER_MISSING: 500,
};

/** The status and body of `err`. */
export function describeError(err: unknown): { status: number; body: { code: string; message: string } } {
  if (err instanceof ServeError) return { status: err.status, body: { code: err.code, message: err.message } };
  if (err instanceof LocksmithError) return { status: STATUS[err.code] ?? 500, body: { code: err.code, message: err.message } };
  const e = err as Partial<FastifyError>;
  if (e.validation) return { status: 400, body: { code: 'INVALID_ARGUMENT', message: e.message ?? 'invalid request' } };
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status === 413) return { status, body: { code: 'LIMIT_EXCEEDED', message: 'the request body is too large' } };
  if (status >= 400 && status < 500) return { status, body: { code: 'INVALID_ARGUMENT', message: e.message ?? 'bad request' } };
  return { status: 500, body: { code: 'INTERNAL', message: 'internal error (logged by the service)' } };
}

/** Fastify's error handler: the typed body, and a log line for a server-side failure. */
export function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const { status, body } = describeError(err);
  if (status >= 500) request.log.error({ err: { message: (err as Error).message, code: body.code } }, 'request failed');
  void reply.status(status).send(body);
}

/**
 * `GET /openapi.json`: OpenAPI 3.1 built from the very schemas Fastify validates with, so
 * the description cannot drift from what the service accepts (docs/serve.md, "API").
 */
import type { RouteOptions } from 'fastify';

type Schema = Record<string, unknown>;
interface RouteSchema {
  summary?: string;
  tags?: readonly string[];
  params?: Schema;
  querystring?: Schema;
  body?: Schema;
  response?: Record<string, Schema>;
}

/** Collects the routes as Fastify registers them, and renders the document. */
export class OpenApi {
  readonly #paths: Record<string, Record<string, unknown>> = {};

  /** The `onRoute` hook. */
  add(route: RouteOptions): void {
    const schema = route.schema as RouteSchema | undefined;
    if (!schema || route.url === '/openapi.json') return;
    const path = route.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      if (m === 'HEAD') continue;
      (this.#paths[path] ??= {})[m.toLowerCase()] = operation(schema);
    }
  }

  /** The OpenAPI 3.1 document. */
  document(version: string): Record<string, unknown> {
    return {
      openapi: '3.1.0',
      info: { title: 'locksmith serve', version, description: 'Locks over any locksmith backend. docs/serve.md' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
      paths: this.#paths,
    };
  }
}

function operation(s: RouteSchema): Record<string, unknown> {
  const parameters = [...toParameters(s.params, 'path'), ...toParameters(s.querystring, 'query')];
  const responses: Record<string, unknown> = {};
  for (const [status, body] of Object.entries(s.response ?? { 200: {} })) {
    responses[status] = { description: status === '200' ? 'OK' : 'error', content: { 'application/json': { schema: body } } };
  }
  return {
    ...(s.summary ? { summary: s.summary } : {}),
    ...(s.tags ? { tags: s.tags } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(s.body ? { requestBody: { required: true, content: { 'application/json': { schema: s.body } } } } : {}),
    responses,
  };
}

function toParameters(schema: Schema | undefined, where: 'path' | 'query'): unknown[] {
  const props = (schema?.properties ?? {}) as Record<string, unknown>;
  const required = new Set((schema?.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => ({ name, in: where, required: where === 'path' || required.has(name), schema: s }));
}

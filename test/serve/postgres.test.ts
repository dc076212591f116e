/** The service over a real PostgreSQL (docs/serve.md): the API and election cases. */
import { after, before } from 'node:test';
import { startPostgres } from '../../scripts/servers/postgres.js';
import { useServer } from '../helpers.js';
import { apiCases } from './api-cases.js';
import { electionCases } from './election-cases.js';
import { startService, type Service } from './service.js';

const postgres = await useServer(() => startPostgres());
let service: Service;
before(async () => {
  service = await startService(`${postgres.url}${postgres.url.includes('?') ? '&' : '?'}migrate=true`);
});
after(async () => {
  await service.close();
});
apiCases(() => service.base);
electionCases(() => service);

/** The service over a real Redis (docs/serve.md): the API and election cases. */
import { after, before } from 'node:test';
import { startRedis } from '../../scripts/servers/redis.js';
import { useServer } from '../helpers.js';
import { apiCases } from './api-cases.js';
import { electionCases } from './election-cases.js';
import { startService, type Service } from './service.js';
import { stateCases } from './stream-cases.js';

const redis = await useServer(() => startRedis());
let service: Service;
before(async () => {
  service = await startService(redis.url);
});
after(async () => {
  await service.close();
});
apiCases(() => service.base);
electionCases(() => service);
stateCases(() => service);

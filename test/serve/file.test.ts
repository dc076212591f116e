/** The service over file:// (docs/serve.md): the API and election cases. */
import { after, before } from 'node:test';
import { apiCases } from './api-cases.js';
import { electionCases } from './election-cases.js';
import { fileUrl, startService, type Service } from './service.js';

let service: Service;
before(async () => {
  service = await startService(fileUrl());
});
after(async () => {
  await service.close();
});
apiCases(() => service.base);
electionCases(() => service);

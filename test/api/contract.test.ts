// The contract layer itself must be able to fail: a route that answers with a field the
// spec lacks, or with an undeclared status, is reported.
import t from 'tap';
import { contractViolation } from '../fixtures/contract.js';

const incident = {
  id: 1, originId: 'A', type: 'FIRE', timeOfOrigin: null, timeReceived: null, timeUpdated: null, status: 'OPEN',
  timeClosed: null, latitude: 1, longitude: 2, priority: 1, description: null, resources: [],
};
const json = { 'content-type': 'application/json; charset=utf-8' };

t.test('when a getIncident response matches the spec, then no violation', async (t) => {
  t.equal(contractViolation('GET', '/api/incidents/1', { statusCode: 200, headers: json, body: JSON.stringify(incident) }), null);
});

t.test('when a handler returns a field the spec lacks, then the contract reports it', async (t) => {
  const v = contractViolation('GET', '/api/incidents/1', { statusCode: 200, headers: json, body: JSON.stringify({ ...incident, secret: 'x' }) });
  t.match(v, /getIncident 200: body does not match/);
});

t.test('when a handler answers an undeclared status, then the contract reports it', async (t) => {
  const v = contractViolation('GET', '/api/incidents/1', { statusCode: 418, headers: json, body: '{}' });
  t.match(v, /status 418 is not declared/);
});

t.test('when an error is not problem+json, then the contract reports it', async (t) => {
  const v = contractViolation('GET', '/api/incidents/1', { statusCode: 404, headers: json, body: '{"type":"x","title":"t","status":404}' });
  t.match(v, /content type "application\/json" is not declared/);
});

t.test('when a 204 carries a body, then the contract reports it', async (t) => {
  const v = contractViolation('DELETE', '/api/incidents/1', { statusCode: 204, headers: {}, body: 'oops' });
  t.match(v, /declares no body/);
});

t.test('when a response carries a header the spec declares only on other responses, then the contract reports it', async (t) => {
  const problem = { 'content-type': 'application/problem+json' };
  const notFound = JSON.stringify({ type: 'about:blank', title: 'Not Found', status: 404 });
  // a GET never replays: its 404 declares no Idempotent-Replayed; a keyed DELETE's 404 does
  t.match(contractViolation('GET', '/api/incidents/1', { statusCode: 404, headers: { ...problem, 'idempotent-replayed': 'true' }, body: notFound }), /getIncident 404: header idempotent-replayed is not declared/);
  t.equal(contractViolation('DELETE', '/api/incidents/1', { statusCode: 404, headers: { ...problem, 'idempotent-replayed': 'true' }, body: notFound }), null);
  t.equal(contractViolation('GET', '/api/incidents/1', { statusCode: 200, headers: { ...json, etag: '"1-1"' }, body: JSON.stringify(incident) }), null);
  // Location is declared only inline, on the create's 200 and 202: an update's 200 does not declare it
  t.match(contractViolation('PUT', '/api/incidents/1', { statusCode: 200, headers: { ...json, location: '/api/incidents/1' }, body: JSON.stringify(incident) }), /updateIncident 200: header location is not declared/);
  // a header no response declares (content-length, date) is not the contract's business
  t.equal(contractViolation('GET', '/api/incidents/1', { statusCode: 200, headers: { ...json, 'x-unlisted': '1' }, body: JSON.stringify(incident) }), null);
});

t.test('when a deliberately wrong route answers through a real server, then the contract layer rejects it', async (t) => {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  t.teardown(() => app.close());
  // a fixture route at a spec path that returns an extra field, and one with a wrong status
  app.get('/api/incidents/:id', async () => ({ ...incident, leaked: 'x' }));
  app.delete('/api/incidents/:id', async (_req, reply) => reply.code(200).send({ ok: true }));
  const extra = await app.inject({ method: 'GET', url: '/api/incidents/1' });
  t.match(contractViolation('GET', '/api/incidents/1', extra), /getIncident 200: body does not match the schema: data must NOT have additional properties/);
  const wrong = await app.inject({ method: 'DELETE', url: '/api/incidents/1' });
  t.match(contractViolation('DELETE', '/api/incidents/1', wrong), /deleteIncident: status 200 is not declared/);
});

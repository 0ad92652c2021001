// The webhook bodies (domain/webhook-payloads.ts): one constructor per event type of openapi.yaml's
// `webhooks`, each body checked against its entry by the same helper the API, e2e and contract
// tests use (test/fixtures/webhook-payloads.ts); and the helper refusing what the spec does not say.
import t from 'tap';
import {
  incidentClosedPayload,
  incidentDeliveryPayload,
  incidentResponsePayload,
  WEBHOOK_PAYLOADS,
  webhookBody,
} from '../../../src/domain/webhook-payloads.js';
import { WEBHOOK_EVENT_TYPES } from '../../../src/domain/webhook.js';
import { SPEC_WEBHOOK_TYPES, webhookViolation } from '../../fixtures/webhook-payloads.js';

const AT = '2026-11-29T10:00:00.000Z';

t.test('when a push is acknowledged or expires, then incident.delivery carries the push, its callsign and its state, and matches the spec', async (t) => {
  const delivered = incidentDeliveryPayload({
    incidentId: 4, originId: 'CAD-4', deviceId: 7, eventId: 12, eventType: 'incidentAssigned', attributes: { callsign: 'E1' }, state: 'DELIVERED', at: AT,
  });
  t.same(delivered, {
    type: 'incident.delivery',
    timestamp: AT,
    data: { incidentId: 4, originId: 'CAD-4', deviceId: 7, callsign: 'E1', eventId: 12, eventType: 'incidentAssigned', state: 'DELIVERED' },
  });
  t.equal(webhookViolation(webhookBody(delivered)), null);
  // an event with no callsign, an incident version not found: null and '' (as sent before 2026-11-29)
  const bare = incidentDeliveryPayload({ incidentId: 4, originId: null, deviceId: 7, eventId: 13, eventType: 'incidentDeassigned', attributes: {}, state: 'EXPIRED', at: AT });
  t.match(bare.data, { originId: '', callsign: null, eventType: 'incidentDeassigned', state: 'EXPIRED' });
  t.equal(webhookViolation(bare), null);
});

t.test('when an answer moves an assignment forward, then incident.response carries the device, the event, the answer and the time recorded, stamped with the event time', async (t) => {
  const payload = incidentResponsePayload({
    incident: { id: 4, originId: 'CAD-4' },
    event: { id: 30, deviceId: 7, eventTime: AT },
    callsign: 'E1',
    status: 'RESPONDING',
    responseId: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    time: '2026-11-29T09:59:58.000Z',
  });
  t.same(payload, {
    type: 'incident.response',
    timestamp: AT,
    data: { incidentId: 4, originId: 'CAD-4', deviceId: 7, eventId: 30, callsign: 'E1', status: 'RESPONDING', responseId: '8e03978e-40d5-43e8-bc93-6894a57f9324', time: '2026-11-29T09:59:58.000Z' },
  });
  t.equal(webhookViolation(webhookBody(payload)), null);
});

t.test('when an incident closes, then incident.closed carries its timeClosed; deleted while open, the time of the deletion', async (t) => {
  const closed = incidentClosedPayload({ incident: { id: 4, originId: 'CAD-4', timeClosed: '2026-11-29T09:00:00.000Z' }, deleted: false, at: AT });
  t.same(closed, { type: 'incident.closed', timestamp: AT, data: { incidentId: 4, originId: 'CAD-4', timeClosed: '2026-11-29T09:00:00.000Z', deleted: false } });
  const deleted = incidentClosedPayload({ incident: { id: 4, originId: 'CAD-4', timeClosed: null }, deleted: true, at: AT });
  t.same(deleted.data, { incidentId: 4, originId: 'CAD-4', timeClosed: AT, deleted: true });
  for (const p of [closed, deleted]) t.equal(webhookViolation(webhookBody(p)), null);
});

t.test('when a body is built, then it is the envelope {type, timestamp, data}, in that order, as signed and sent', async (t) => {
  const body = webhookBody(incidentClosedPayload({ incident: { id: 4, originId: 'CAD-4', timeClosed: AT }, deleted: false, at: AT }));
  t.equal(body, `{"type":"incident.closed","timestamp":"${AT}","data":{"incidentId":4,"originId":"CAD-4","timeClosed":"${AT}","deleted":false}}`);
});

t.test('when the event types are listed, then each of the spec has a constructor and none other exists', async (t) => {
  t.same([...WEBHOOK_EVENT_TYPES].sort(), [...SPEC_WEBHOOK_TYPES].sort());
  t.same(Object.keys(WEBHOOK_PAYLOADS).sort(), [...SPEC_WEBHOOK_TYPES].sort());
});

t.test('when a body lacks a required field, has one the spec does not name, or a wrong type, then the helper refuses it', async (t) => {
  const good = incidentClosedPayload({ incident: { id: 4, originId: 'CAD-4', timeClosed: AT }, deleted: false, at: AT });
  const { deleted: _deleted, ...missing } = good.data;
  t.match(webhookViolation({ ...good, data: missing }), /webhooks\.incident\.closed: the body does not match: .*deleted/);
  t.match(webhookViolation({ ...good, data: { ...good.data, extra: 1 } }), /must NOT have additional properties/);
  t.match(webhookViolation({ ...good, data: { ...good.data, incidentId: 0 } }), /incidentId/);
  t.match(webhookViolation({ type: 'incident.closed', data: good.data }), /timestamp/);
  t.match(webhookViolation({ ...good, type: 'incident.reopened' }), /"incident.reopened" has no entry/);
  t.match(webhookViolation('{"type":'), /not JSON/);
  // a delivery's body under another event's type
  t.match(webhookViolation({ ...good, type: 'incident.delivery' }), /webhooks\.incident\.delivery: the body does not match/);
});

t.test('when headers are given, then the Standard Webhooks headers the spec declares are required and checked', async (t) => {
  const body = webhookBody(incidentClosedPayload({ incident: { id: 4, originId: 'CAD-4', timeClosed: AT }, deleted: false, at: AT }));
  const headers = { 'webhook-id': `msg_${'ab'.repeat(16)}`, 'webhook-timestamp': '1795946400', 'webhook-signature': 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,bm9wZQ==' };
  t.equal(webhookViolation(body, headers), null);
  t.match(webhookViolation(body, { ...headers, 'webhook-signature': undefined }), /header webhook-signature is missing/);
  t.match(webhookViolation(body, { ...headers, 'webhook-id': 'msg-1' }), /header webhook-id does not match/);
  t.match(webhookViolation(body, { ...headers, 'webhook-signature': 'v2,abc' }), /header webhook-signature does not match/);
});

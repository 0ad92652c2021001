// The wake sender shares its room by owner (DESIGN section 14; domain/webhook-share.ts
// shareByOwner), through the real app (app.inject), its real sender and store, on the adapter
// TEST_ADAPTER names. The FCM channel is a stand-in: a wake-up to a token starting "stuck" never
// answers (until the test ends), as a provider or a target that hangs until the channel's
// timeout; the others are accepted at once. Every wait is bounded and generous; nothing here
// times the sender.
import t from 'tap';
import type { WakeSettings } from '../../src/config-wake.js';
import type { WakeChannel, WakeMessage, WakeOutcome } from '../../src/ports/wake.js';
import { makeApp } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { until } from '../fixtures/sockets.js';

class HangingFcm implements WakeChannel<'fcm'> {
  readonly kind = 'fcm' as const;
  /** wake-ups to stuck tokens, still waiting for an answer */
  readonly hanging: (() => void)[] = [];
  readonly accepted: WakeMessage[] = [];
  private released = false;
  send(target: { token: string }, message: WakeMessage): Promise<WakeOutcome> {
    if (!target.token.startsWith('stuck')) {
      this.accepted.push(message);
      return Promise.resolve({ outcome: 'accepted', status: 200 });
    }
    // once released (the test's end), answers at once and for good: the sender's stop waits for its steps
    if (this.released) return Promise.resolve({ outcome: 'rejected', status: null, detail: 'released' });
    return new Promise((resolve) => this.hanging.push(() => resolve({ outcome: 'rejected', status: null, detail: 'released' })));
  }
  release(): void {
    this.released = true;
    for (const r of this.hanging.splice(0)) r();
  }
}

t.test('when one owner’s wake-ups hang, then another owner’s still go, and the hanging owner holds at most half the node’s room', async (t) => {
  const fcm = new HangingFcm();
  const { app } = await makeApp(t, {
    config: { wakeAfterS: 1, escalateSmsAfterS: 0, escalateVoiceAfterS: 0, wake: { configured: new Set(['fcm']) } as WakeSettings },
    wakeChannels: { fcm },
    wakeSender: { pollMs: 20, inFlightMax: 4, perLane: 4 }, // here the owner's cap (2) is what holds
  });
  // runs before the app closes (teardowns run last registered first): the sender's stop waits for its steps
  t.teardown(() => fcm.release());
  const w = await world(app);
  // the CAD's two E1 devices hold stuck tokens; the other owner's E1 a good one
  for (const [auth, deviceId, token] of [
    [w.cad, w.e1a, 'stuck-token-a-0123456789'],
    [w.cad, w.e1b, 'stuck-token-b-0123456789'],
    [w.other, w.otherE1, 'good-token-0123456789abc'],
  ] as const) {
    t.equal((await send(app, auth, 'POST', `/api/devices/${deviceId}/wake-targets`, { kind: 'fcm', token })).status, 201);
  }
  // 8 incidents of the CAD, 2 devices each: 16 wake-ups that hang, four times the node's room
  for (let i = 0; i < 8; i++) t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `STUCK-${i}`, resources: ['E1'] }))).status, 202);
  await until('the CAD’s wake-ups under way', () => fcm.hanging.length >= 2, 20_000);
  for (let i = 0; i < 3; i++) t.equal((await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: `LATE-${i}`, resources: ['E1'] }))).status, 202);
  await until('the other owner’s 3 wake-ups', () => fcm.accepted.length >= 3, 20_000);
  t.same(fcm.accepted.map((m) => m.deviceId), [w.otherE1, w.otherE1, w.otherE1], 'each of the other owner’s wake-ups sent, once, to its device');
  t.ok(fcm.hanging.length <= 2, `the CAD holds at most 2 of the node’s 4 slots (${fcm.hanging.length})`);
});

t.test('when an owner’s wake-ups hang (its push provider down), then its SMS escalation still goes: each kind of step has its own share of the owner’s room', async (t) => {
  const fcm = new HangingFcm();
  const texts: WakeMessage[] = [];
  const sms: WakeChannel<'sms'> = { kind: 'sms', send: async (_target, message) => (texts.push(message), { outcome: 'accepted', status: 201 }) };
  const { app } = await makeApp(t, {
    config: { wakeAfterS: 1, escalateSmsAfterS: 2, escalateVoiceAfterS: 0, wake: { configured: new Set(['fcm', 'sms']) } as WakeSettings },
    wakeChannels: { fcm, sms },
    wakeSender: { pollMs: 20, inFlightMax: 8 },
  });
  t.teardown(() => fcm.release());
  const w = await world(app);
  for (const [deviceId, token, phone] of [
    [w.e1a, 'stuck-token-a-0123456789', '+41791110001'],
    [w.e1b, 'stuck-token-b-0123456789', '+41791110002'],
  ] as const) {
    t.equal((await send(app, w.cad, 'POST', `/api/devices/${deviceId}/wake-targets`, { kind: 'fcm', token })).status, 201);
    t.equal((await send(app, w.cad, 'POST', `/api/devices/${deviceId}/wake-targets`, { kind: 'sms', phone })).status, 201);
  }
  // 8 incidents, 2 devices each: 16 wake-ups that hang, then 16 SMS due a second later
  for (let i = 0; i < 8; i++) t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `DOWN-${i}`, resources: ['E1'] }))).status, 202);
  await until('the 16 SMS', () => texts.length >= 16, 20_000);
  t.equal(new Set(texts.map((m) => `${m.incidentId}/${m.deviceId}`)).size, 16, 'one SMS to each device of each incident');
  t.ok(fcm.hanging.length <= 2, `the hanging wake-ups hold at most their lane’s 2 of the owner’s 4 slots (${fcm.hanging.length})`);
});

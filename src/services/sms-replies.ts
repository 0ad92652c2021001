// Answers by SMS (DESIGN section 14): a responder replies "1" (RESPONDING) or "2" (NOT_AVAILABLE)
// to the wake-up SMS; the provider POSTs the reply to /api/wake/sms-reply, signed. Only a
// request whose X-Twilio-Signature is valid is read: HMAC-SHA1 with the account's auth token over
// PUBLIC_URL + the path, then every POST parameter's name and value, sorted by name (Twilio's
// documented scheme), compared in constant time. The reply is then an answer like any other
// (services/responses.ts: the event, the incident.response webhook, the responders list), to
// the newest SMS this service had accepted for the sender's number (domain/wake.ts smsReplyTo):
// that SMS's device and incident, if the assignment still holds. Its responseId is derived from the provider's MessageSid: the provider's retry of one message is
// a replay of the same answer, never a second one.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { smsReplyStatus, smsReplyTo } from '../domain/wake.js';
import type { ResponseInput, ResponseResult } from '../domain/response.js';
import type { WakeTargetStorePort } from '../ports/wake-targets.js';

/** the SMS steps to this number read to find the newest one accepted (the newest may have failed) */
const SMS_SENT_READ = 20;

/** the path the provider is told to POST replies to (PUBLIC_URL + this) */
export const SMS_REPLY_PATH = '/api/wake/sms-reply';

/** Twilio's request signature: base64 HMAC-SHA1 over the URL and the sorted parameters */
export function twilioSignature(authToken: string, url: string, params: Readonly<Record<string, string>>): string {
  const data = url + Object.keys(params).sort().map((k) => k + params[k]).join('');
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** whether `given` is the request's signature (constant time) */
export function signatureHolds(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** a UUID named by the message (RFC 9562 version 8, from SHA-256): the same message, the same answer */
export function responseIdOf(messageSid: string): string {
  const h = createHash('sha256').update(`sms-reply:${messageSid}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x80;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

export type SmsReplyOutcome =
  | { kind: 'forged' }
  | { kind: 'not-an-answer' }
  | { kind: 'no-assignment' }
  | { kind: 'answered'; status: 'RESPONDING' | 'NOT_AVAILABLE'; results: { deviceId: number; incidentId: number; result: ResponseResult }[] };

/** what the responder is told back (the TwiML message) */
export function smsReplyText(o: Exclude<SmsReplyOutcome, { kind: 'forged' }>): string {
  switch (o.kind) {
    case 'not-an-answer':
      return 'Not recorded. Reply 1 = responding, 2 = not available.';
    case 'no-assignment':
      return 'Not recorded: no alert was texted to this number.';
    case 'answered': {
      const accepted = o.results.filter((r) => r.result.accepted).length;
      const what = o.status === 'RESPONDING' ? 'Responding' : 'Not available';
      return accepted > 0 ? `${what}: recorded.` : 'Not recorded: the assignment was stood down.';
    }
  }
}

export interface SmsReplySettings {
  /** the account's auth token (TWILIO_AUTH_TOKEN); null: SMS is not configured */
  authToken: string | null;
  /** PUBLIC_URL: the origin the provider calls */
  publicUrl: string;
}

export class SmsReplyService {
  constructor(
    private readonly targets: Pick<WakeTargetStorePort, 'smsSentTo'>,
    private readonly answer: (deviceId: number, input: ResponseInput) => Promise<ResponseResult>,
    private readonly settings: SmsReplySettings,
  ) {}

  get configured(): boolean {
    return this.settings.authToken !== null;
  }

  /** a reply as the provider posted it (form fields) with its X-Twilio-Signature */
  async reply(params: Readonly<Record<string, string>>, signature: string | undefined): Promise<SmsReplyOutcome> {
    const token = this.settings.authToken;
    if (token === null || !signatureHolds(signature, twilioSignature(token, this.settings.publicUrl + SMS_REPLY_PATH, params))) return { kind: 'forged' };
    const status = smsReplyStatus(params.Body ?? '');
    if (status === null) return { kind: 'not-an-answer' };
    const from = params.From ?? '';
    const sid = params.MessageSid ?? params.SmsSid ?? '';
    // the newest SMS accepted for this number: what the responder answers (a reply has no thread);
    // whether that assignment still holds is the response service's to say
    const to = sid === '' ? null : smsReplyTo(await this.targets.smsSentTo(from, SMS_SENT_READ));
    if (to === null) return { kind: 'no-assignment' };
    const open = [to];
    const responseId = responseIdOf(sid);
    const results = [];
    for (const a of open) {
      results.push({ ...a, result: await this.answer(a.deviceId, { responseId, incidentId: a.incidentId, status }) });
    }
    return { kind: 'answered', status, results };
  }
}

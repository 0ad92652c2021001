// SMS and voice wake-ups through a Twilio-compatible REST API (DESIGN section 14): a message
// (POST …/Messages.json) and a call reading the alert out (POST …/Calls.json with inline TwiML),
// both with HTTP Basic auth (the account SID and its auth token). The API base (TWILIO_API_BASE)
// is the operator's, not a device's: no address guard here.
//
// A 404 is `rejected`, not `gone`: a phone number is an operator's typo more often than a dead
// device, and removing it would hide the typo. Replies to the SMS ("1", "2") come back through
// POST /api/wake/sms-reply, which is not this file's.
import type { WakeChannel, WakeMessage, WakeOutcome, WakeTarget } from '../../ports/wake.js';
import { ATTEMPT_TIMEOUT_MS, cleanDetail, connectionDetail, readCapped, startAttempt, statusOutcome } from './attempt.js';
import { smsText, voiceText } from '../../domain/wake.js';

const DEFAULT_API_BASE = 'https://api.twilio.com';

export interface TwilioSettings {
  accountSid: string;
  authToken: string;
  /** the number (E.164) or messaging service the SMS and calls come from */
  from: string;
  /** the API's origin (TWILIO_API_BASE), default https://api.twilio.com */
  apiBase?: string;
  /** an attempt's deadline (default 10 s) */
  timeoutMs?: number;
}

/** the SMS text: the domain's (domain/wake.ts smsText: the incident's type and originId, and how to answer) */
export const smsBody = smsText;

const xmlEscape = (s: string) => s.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);

/** the call's TwiML: the domain's text (domain/wake.ts voiceText) read out */
export function callTwiml(m: WakeMessage): string {
  return `<Response><Say>${xmlEscape(voiceText(m))}</Say></Response>`;
}

/** one account's REST client: a POST of a form, read as a wake outcome */
class TwilioApi {
  private readonly base: string;
  private readonly authorization: string;
  private readonly timeoutMs: number;

  constructor(private readonly settings: TwilioSettings) {
    const apiBase = (settings.apiBase ?? DEFAULT_API_BASE).replace(/\/+$/, '');
    this.base = `${apiBase}/2010-04-01/Accounts/${encodeURIComponent(settings.accountSid)}`;
    this.authorization = `Basic ${Buffer.from(`${settings.accountSid}:${settings.authToken}`).toString('base64')}`;
    this.timeoutMs = settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  }

  get from(): string {
    return this.settings.from;
  }

  async post(resource: 'Messages' | 'Calls', form: Record<string, string>, signal: AbortSignal | undefined): Promise<WakeOutcome> {
    const attempt = startAttempt(signal, this.timeoutMs);
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${this.base}/${resource}.json`, {
        method: 'POST',
        headers: { authorization: this.authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams(form).toString(),
        signal: attempt.signal,
        redirect: 'manual',
      });
      text = await readCapped(res.body);
    } catch (err) {
      if (attempt.signal.aborted) return attempt.aborted();
      return { outcome: 'retry', status: null, detail: connectionDetail(err) };
    }
    if (res.status >= 200 && res.status < 300) return { outcome: 'accepted', status: res.status };
    let said = text;
    try {
      const e = JSON.parse(text) as { code?: unknown; message?: unknown };
      said = [e.code, e.message].filter((p) => typeof p === 'string' || typeof p === 'number').join(' ');
    } catch {
      // not JSON: the text as it is
    }
    const secrets = [this.settings.authToken, this.authorization.slice('Basic '.length)];
    return statusOutcome(res.status, cleanDetail(`${res.status} ${said}`, secrets), res.headers.get('retry-after'));
  }
}

export class SmsChannel implements WakeChannel<'sms'> {
  readonly kind = 'sms' as const;
  private readonly api: TwilioApi;

  constructor(settings: TwilioSettings) {
    this.api = new TwilioApi(settings);
  }

  send(target: Extract<WakeTarget, { kind: 'sms' }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome> {
    return this.api.post('Messages', { To: target.phone, From: this.api.from, Body: smsBody(message) }, signal);
  }
}

export class VoiceChannel implements WakeChannel<'voice'> {
  readonly kind = 'voice' as const;
  private readonly api: TwilioApi;

  constructor(settings: TwilioSettings) {
    this.api = new TwilioApi(settings);
  }

  send(target: Extract<WakeTarget, { kind: 'voice' }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome> {
    return this.api.post('Calls', { To: target.phone, From: this.api.from, Twiml: callTwiml(message) }, signal);
  }
}

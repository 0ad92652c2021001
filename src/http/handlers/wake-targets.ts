// Wake target operations: request → WakeTargetService → status. The caller is the device (its
// device token: the hook in security.ts set req.deviceId) or a user. A target's token, endpoint or
// phone is never logged: only its id and kind.
import type { FastifyRequest } from 'fastify';
import type { WakeCaller } from '../../services/wake-targets.js';
import { caller } from '../security.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';
import { refuse } from '../../domain/refusal.js';
import { smsReplyText } from '../../services/sms-replies.js';

function who(req: FastifyRequest): WakeCaller {
  return req.deviceId !== undefined ? { deviceId: req.deviceId } : { principal: caller(req) };
}

/** for the log: the device, or the user, that asked */
function by(w: WakeCaller): { byDevice: number } | { by: number } {
  return 'deviceId' in w ? { byDevice: w.deviceId } : { by: w.principal.user.id };
}

export class WakeTargetHandlers {
  constructor(private readonly ctx: Context) {}

  listWakeTargets: Handler<'listWakeTargets'> = async (req) => this.ctx.wakeTargets.list(who(req), req.params.id);

  createWakeTarget: Handler<'createWakeTarget'> = async (req, reply) => {
    const w = who(req);
    const { record, created } = await this.ctx.wakeTargets.add(w, req.params.id, req.body);
    req.log.info({ deviceId: record.deviceId, targetId: record.id, kind: record.kind, created, ...by(w) }, created ? 'wake target registered' : 'wake target registered again (updated)');
    return reply.code(created ? 201 : 200).send(record);
  };

  deleteWakeTarget: Handler<'deleteWakeTarget'> = async (req, reply) => {
    const w = who(req);
    await this.ctx.wakeTargets.remove(w, req.params.id, req.params.targetId);
    req.log.info({ deviceId: req.params.id, targetId: req.params.targetId, ...by(w) }, 'wake target removed');
    return reply.code(204).send();
  };

  getVapidPublicKey: Handler<'getVapidPublicKey'> = async () => ({ publicKey: this.ctx.wakeTargets.vapidPublicKey() });

  /** a responder's SMS reply, signed by the provider: answered in TwiML (never the sender's number in the log) */
  receiveSmsReply: Handler<'receiveSmsReply'> = async (req, reply) => {
    const replies = this.ctx.smsReplies;
    if (!replies.configured) throw refuse.notFound('SMS is not configured on this service.');
    const params = Object.fromEntries(Object.entries(req.body as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
    const signature = req.headers['x-twilio-signature'];
    const outcome = await replies.reply(params, typeof signature === 'string' ? signature : undefined);
    if (outcome.kind === 'forged') throw refuse.forbidden('The request is not signed by the SMS provider (X-Twilio-Signature).');
    req.log.info({ outcome: outcome.kind, ...(outcome.kind === 'answered' ? { status: outcome.status, answers: outcome.results.map((r) => ({ deviceId: r.deviceId, incidentId: r.incidentId, accepted: r.result.accepted })) } : {}) }, 'SMS reply');
    return reply.type('text/xml; charset=utf-8').send(twiml(smsReplyText(outcome)));
  };
}

const xmlEscape = (s: string) => s.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);

function twiml(message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Message>${xmlEscape(message)}</Message></Response>`;
}


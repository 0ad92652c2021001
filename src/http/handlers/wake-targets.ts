// Wake target operations: request → WakeTargetService → status. The caller is the device (its
// device token: the hook in security.ts set req.deviceId) or a user. A target's token, endpoint or
// phone is never logged: only its id and kind.
import type { FastifyRequest } from 'fastify';
import type { WakeCaller } from '../../services/wake-targets.js';
import { caller } from '../security.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

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
    const target = await this.ctx.wakeTargets.add(w, req.params.id, req.body);
    req.log.info({ deviceId: target.deviceId, targetId: target.id, kind: target.kind, ...by(w) }, 'wake target registered');
    return reply.code(201).send(target);
  };

  deleteWakeTarget: Handler<'deleteWakeTarget'> = async (req, reply) => {
    const w = who(req);
    await this.ctx.wakeTargets.remove(w, req.params.id, req.params.targetId);
    req.log.info({ deviceId: req.params.id, targetId: req.params.targetId, ...by(w) }, 'wake target removed');
    return reply.code(204).send();
  };

  getVapidPublicKey: Handler<'getVapidPublicKey'> = async () => ({ publicKey: this.ctx.wakeTargets.vapidPublicKey() });
}

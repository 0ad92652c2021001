// Permission operations: request → PermissionService → 204.
import type { Link } from '../../services/permissions.js';
import { caller } from '../security.js';
import type { Handler, Schemas } from '../types.js';
import type { Context } from './context.js';

function parse(body: Schemas['Permission']): Link {
  if ('deviceId' in body) return { kind: 'device', userId: body.userId, id: body.deviceId };
  if ('managedUserId' in body) return { kind: 'managedUser', userId: body.userId, id: body.managedUserId };
  return { kind: 'incident', userId: body.userId, id: body.incidentId };
}

export class PermissionHandlers {
  constructor(private readonly ctx: Context) {}

  createPermission: Handler<'createPermission'> = async (req, reply) => {
    const p = caller(req);
    const link = parse(req.body);
    await this.ctx.permissions.grant(p, link);
    req.log.info({ link, by: p.user.id }, 'permission granted');
    return reply.code(204).send();
  };

  deletePermission: Handler<'deletePermission'> = async (req, reply) => {
    const p = caller(req);
    const link = parse(req.body);
    await this.ctx.permissions.remove(p, link);
    req.log.info({ link, by: p.user.id }, 'permission removed');
    return reply.code(204).send();
  };
}

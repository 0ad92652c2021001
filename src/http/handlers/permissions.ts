// Links between a user and a device, a managed user or an incident (Traccar's permissions).
import type { Principal } from '../../auth/authenticator.js';
import { caller } from '../security.js';
import { problems } from '../problem.js';
import type { Handler, Schemas } from '../types.js';
import { requireWritable, type Context } from './context.js';

type Link = { kind: 'device'; userId: number; id: number } | { kind: 'managedUser'; userId: number; id: number } | { kind: 'incident'; userId: number; id: number };

function parse(body: Schemas['Permission']): Link {
  if ('deviceId' in body) return { kind: 'device', userId: body.userId, id: body.deviceId };
  if ('managedUserId' in body) return { kind: 'managedUser', userId: body.userId, id: body.managedUserId };
  return { kind: 'incident', userId: body.userId, id: body.incidentId };
}

export class PermissionHandlers {
  constructor(private readonly ctx: Context) {}

  /** 404 for a missing user or object, then 403 for a readonly caller or unless the caller may make this link */
  private check(p: Principal, link: Link): void {
    const { identity, access } = this.ctx;
    const me = p.user;
    const owner = identity.userById(link.userId);
    if (!owner) throw problems.notFound(`No user ${link.userId}.`);
    const exists =
      link.kind === 'device' ? identity.deviceById(link.id) : link.kind === 'managedUser' ? identity.userById(link.id) : this.ctx.incidents.exists(link.id);
    if (!exists) throw problems.notFound(`No ${link.kind === 'managedUser' ? 'user' : link.kind} ${link.id}.`);
    requireWritable(p);
    if (me.administrator) return;
    const ownsUser = owner.id === me.id || (access.isManager(me) && identity.manages(me.id, owner.id));
    if (!ownsUser) throw problems.forbidden('You may only link yourself or users you manage.');
    const reaches =
      link.kind === 'device'
        ? access.reachesDevice(me, link.id)
        : link.kind === 'incident'
          ? access.reachesIncident(me, link.id)
          : access.isManager(me) && identity.manages(me.id, link.id) && owner.id !== link.id;
    if (!reaches) throw problems.forbidden(`You do not have access to that ${link.kind === 'managedUser' ? 'user' : link.kind}.`);
  }

  createPermission: Handler<'createPermission'> = async (req, reply) => {
    const p = caller(req);
    const link = parse(req.body);
    this.check(p, link);
    const { identity } = this.ctx;
    if (link.kind === 'device') identity.linkDevice(link.userId, link.id);
    else if (link.kind === 'managedUser') identity.linkManagedUser(link.userId, link.id);
    else identity.linkIncident(link.userId, link.id);
    req.log.info({ link, by: p.user.id }, 'permission granted');
    return reply.code(204).send();
  };

  deletePermission: Handler<'deletePermission'> = async (req, reply) => {
    const p = caller(req);
    const link = parse(req.body);
    this.check(p, link);
    const { identity } = this.ctx;
    if (link.kind === 'device') identity.unlinkDevice(link.userId, link.id);
    else if (link.kind === 'managedUser') identity.unlinkManagedUser(link.userId, link.id);
    else identity.unlinkIncident(link.userId, link.id);
    req.log.info({ link, by: p.user.id }, 'permission removed');
    return reply.code(204).send();
  };
}

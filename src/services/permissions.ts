// Links between a user and a device, a managed user or an incident (Traccar's permissions), and
// who may make or remove them.
import { refuse } from '../domain/refusal.js';
import type { IdentityPort } from '../ports/identity.js';
import type { IncidentStorePort } from '../ports/incidents.js';
import type { Access } from './access.js';
import type { Principal } from './authenticator.js';
import { requireWritable } from './writable.js';

export type Link = { kind: 'device'; userId: number; id: number } | { kind: 'managedUser'; userId: number; id: number } | { kind: 'incident'; userId: number; id: number };

export class PermissionService {
  constructor(
    private readonly identity: IdentityPort,
    private readonly incidents: IncidentStorePort,
    private readonly access: Access,
  ) {}

  /**
   * 404 for a missing user or object (an incident the caller has no permission on is missing to
   * it: issue 36, 2026-11-29), then 403 for a readonly caller or unless the caller may make this link
   */
  private async check(p: Principal, link: Link): Promise<void> {
    const { identity, access } = this;
    const me = p.user;
    const owner = await identity.userById(link.userId);
    if (!owner) throw refuse.notFound(`No user ${link.userId}.`);
    const exists =
      link.kind === 'device'
        ? await identity.deviceById(link.id)
        : link.kind === 'managedUser'
          ? await identity.userById(link.id)
          : (await this.incidents.exists(link.id)) && (await access.reachesIncident(me, link.id));
    if (!exists) throw refuse.notFound(`No ${link.kind === 'managedUser' ? 'user' : link.kind} ${link.id}.`);
    requireWritable(p);
    if (me.administrator) return;
    const ownsUser = owner.id === me.id || (access.isManager(me) && (await identity.manages(me.id, owner.id)));
    if (!ownsUser) throw refuse.forbidden('You may only link yourself or users you manage.');
    const reaches =
      link.kind === 'device'
        ? await access.reachesDevice(me, link.id)
        : link.kind === 'incident'
          ? await access.reachesIncident(me, link.id)
          : access.isManager(me) && owner.id !== link.id && (await identity.manages(me.id, link.id));
    if (!reaches) throw refuse.forbidden(`You do not have access to that ${link.kind === 'managedUser' ? 'user' : link.kind}.`);
  }

  async grant(p: Principal, link: Link): Promise<void> {
    await this.check(p, link);
    if (link.kind === 'device') await this.identity.linkDevice(link.userId, link.id);
    else if (link.kind === 'managedUser') await this.identity.linkManagedUser(link.userId, link.id);
    else await this.identity.linkIncident(link.userId, link.id);
  }

  async remove(p: Principal, link: Link): Promise<void> {
    await this.check(p, link);
    if (link.kind === 'device') await this.identity.unlinkDevice(link.userId, link.id);
    else if (link.kind === 'managedUser') await this.identity.unlinkManagedUser(link.userId, link.id);
    else await this.identity.unlinkIncident(link.userId, link.id);
  }
}

// Who may do what (DESIGN section 4). Administrators: everything. Managers (userLimit ≠ 0):
// the users they manage and what those reach. Readonly users change nothing.
import type { IdentityPort, UserRecord } from '../ports/identity.js';

export class Access {
  constructor(private readonly identity: IdentityPort) {}

  isManager(user: UserRecord): boolean {
    return user.administrator || user.userLimit !== 0;
  }

  /** caller may read/administer `target` (self, admin, or its manager) */
  async canSeeUser(caller: UserRecord, targetId: number): Promise<boolean> {
    return caller.administrator || caller.id === targetId || (this.isManager(caller) && (await this.identity.manages(caller.id, targetId)));
  }

  /** caller administers `target`: admin, or a manager of it (never of an administrator) */
  async canManageUser(caller: UserRecord, target: UserRecord): Promise<boolean> {
    if (caller.administrator) return true;
    return this.isManager(caller) && !target.administrator && (await this.identity.manages(caller.id, target.id));
  }

  /** user ids whose links the caller sees (itself and its managed users) */
  async visibleOwnerIds(caller: UserRecord): Promise<number[]> {
    return this.isManager(caller) ? [caller.id, ...(await this.identity.managedUserIds(caller.id))] : [caller.id];
  }

  async reachesDevice(caller: UserRecord, deviceId: number): Promise<boolean> {
    return caller.administrator || this.identity.reachesDevice(caller.id, deviceId);
  }

  /** which of `deviceIds` the caller reaches now ('all' for an administrator), in one query */
  async reachedAmong(caller: UserRecord, deviceIds: readonly number[]): Promise<ReadonlySet<number> | 'all'> {
    return caller.administrator ? 'all' : this.identity.devicesReachedAmong(caller.id, deviceIds);
  }

  async reachesIncident(caller: UserRecord, incidentId: number): Promise<boolean> {
    return caller.administrator || this.identity.reachesIncident(caller.id, incidentId);
  }
}

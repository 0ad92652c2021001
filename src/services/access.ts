// Who may do what (DESIGN section 4). Administrators: everything. Managers (userLimit ≠ 0):
// the users they manage and what those reach. Readonly users change nothing.
import type { IdentityPort, UserRecord } from '../ports/identity.js';

export class Access {
  constructor(private readonly identity: IdentityPort) {}

  isManager(user: UserRecord): boolean {
    return user.administrator || user.userLimit !== 0;
  }

  /** caller may read/administer `target` (self, admin, or its manager) */
  canSeeUser(caller: UserRecord, targetId: number): boolean {
    return caller.administrator || caller.id === targetId || (this.isManager(caller) && this.identity.manages(caller.id, targetId));
  }

  /** caller administers `target`: admin, or a manager of it (never of an administrator) */
  canManageUser(caller: UserRecord, target: UserRecord): boolean {
    if (caller.administrator) return true;
    return this.isManager(caller) && !target.administrator && this.identity.manages(caller.id, target.id);
  }

  /** user ids whose links the caller sees (itself and its managed users) */
  visibleOwnerIds(caller: UserRecord): number[] {
    return this.isManager(caller) ? [caller.id, ...this.identity.managedUserIds(caller.id)] : [caller.id];
  }

  reachesDevice(caller: UserRecord, deviceId: number): boolean {
    return caller.administrator || this.identity.reachesDevice(caller.id, deviceId);
  }

  /** which of `deviceIds` the caller reaches now ('all' for an administrator), in one query */
  reachedAmong(caller: UserRecord, deviceIds: readonly number[]): ReadonlySet<number> | 'all' {
    return caller.administrator ? 'all' : this.identity.devicesReachedAmong(caller.id, deviceIds);
  }

  reachesIncident(caller: UserRecord, incidentId: number): boolean {
    return caller.administrator || this.identity.reachesIncident(caller.id, incidentId);
  }
}

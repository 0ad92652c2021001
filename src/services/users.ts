// User administration with Traccar's shapes and DESIGN section 4's rules: who may create, see,
// change and delete whom, the limits a manager gives, and the last working administrator.
import { Refused, refuse } from '../domain/refusal.js';
import { utc } from '../domain/time.js';
import type { Clock } from '../ports/clock.js';
import { UniqueViolation, type IdentityPort, type UserChanges, type UserRecord } from '../ports/identity.js';
import type { Access } from './access.js';
import type { Authenticator, Principal } from './authenticator.js';
import { hashPassword } from './secrets.js';
import { requireWritable } from './writable.js';

/** the user fields a request may send (the spec's UserFields) */
export interface UserFields {
  name?: string;
  email?: string;
  password?: string;
  phone?: string | null;
  readonly?: boolean;
  administrator?: boolean;
  map?: string | null;
  latitude?: number;
  longitude?: number;
  zoom?: number;
  coordinateFormat?: string | null;
  disabled?: boolean;
  expirationTime?: string | null;
  deviceLimit?: number;
  userLimit?: number;
  deviceReadonly?: boolean;
  limitCommands?: boolean;
  fixedEmail?: boolean;
  poiLayer?: string | null;
  createIncidents?: boolean;
  attributes?: Record<string, unknown>;
  id?: unknown;
}

/**
 * settings only an administrator (or, except `administrator`, `userLimit` and `createIncidents`, a
 * manager of the user) may change. `createIncidents` (issue 36): an originId is unique across the
 * service, so whoever may create can take another tenant's; only an administrator says who may.
 */
const PRIVILEGED = ['administrator', 'readonly', 'disabled', 'expirationTime', 'deviceLimit', 'userLimit', 'deviceReadonly', 'limitCommands', 'fixedEmail', 'createIncidents'] as const;
const MANAGER_MAY_NOT = new Set<string>(['administrator', 'userLimit', 'createIncidents']);

// An email that only looks like another: invisible and format characters (U+200B, bidi
// controls, soft hyphen, BOM), control characters, any space or separator, private-use,
// unassigned and surrogate code points. Letters of any script are fine.
const LOOK_ALIKE = /[\p{Cc}\p{Cf}\p{Z}\p{Co}\p{Cn}\p{Cs}\p{Default_Ignorable_Code_Point}]/u;

/** 400 for an email with characters that hide what it is */
function checkEmail(email: string | undefined): void {
  if (email === undefined || !LOOK_ALIKE.test(email)) return;
  throw refuse.invalid('`email` must not contain spaces, invisible, format or control characters.', [
    { path: '/body/email', message: 'must not contain spaces, invisible, format or control characters' },
  ]);
}

const emailKey = (email: string) => email.trim().toLowerCase();

/** may a creator with this deviceLimit give `limit` to a user (-1: unlimited)? */
function withinDeviceLimit(limit: number, creatorLimit: number): boolean {
  return creatorLimit === -1 || (limit !== -1 && limit <= creatorLimit);
}

function columns(body: UserFields): UserChanges {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k === 'password' || k === 'id' || v === undefined) continue;
    if (k === 'attributes') out.attributes = JSON.stringify(v);
    else if (k === 'expirationTime') out.expirationTime = utc(v as string | null);
    else out[k] = v;
  }
  return out as UserChanges;
}

function emailTaken(): Refused {
  return new Refused('EMAIL_TAKEN', 'Another user already has this email.');
}

export class UserService {
  constructor(
    private readonly identity: IdentityPort,
    private readonly access: Access,
    private readonly auth: Authenticator,
    private readonly clock: Clock,
    /** USER_DEFAULT_DEVICE_LIMIT */
    private readonly defaultDeviceLimit: number,
  ) {}

  /** can this user administer now (enabled, writable, not expired)? */
  private administers(u: Pick<UserRecord, 'administrator' | 'readonly' | 'disabled' | 'expirationTime'>): boolean {
    return u.administrator && !u.readonly && this.auth.usable(u);
  }

  private otherAdministrators(identity: IdentityPort, exceptId: number): Promise<number> {
    return identity.countWorkingAdministrators(this.clock.now().toISOString(), exceptId);
  }

  async list(me: UserRecord, userId: number | undefined): Promise<UserRecord[]> {
    if (userId !== undefined) {
      if (!me.administrator && !(userId === me.id || (this.access.isManager(me) && (await this.identity.manages(me.id, userId))))) {
        throw refuse.forbidden('Only administrators, or the manager of that user, may list the users it manages.');
      }
      return this.identity.listUsers(await this.identity.managedUserIds(userId));
    }
    if (me.administrator) return this.identity.listUsers();
    return this.identity.listUsers(await this.access.visibleOwnerIds(me));
  }

  async get(me: UserRecord, id: number): Promise<UserRecord> {
    const target = await this.identity.userById(id);
    if (!target) throw refuse.notFound(`No user ${id}.`);
    if (!(await this.access.canSeeUser(me, target.id))) throw refuse.forbidden('You may not see this user.');
    return target;
  }

  /**
   * The deviceLimit the new user gets, after 403 when a manager may not create it: managers
   * create ordinary users, up to their userLimit, who create no more devices than they may.
   * Without one in the body: unlimited for a new administrator or manager (only an
   * administrator creates those), else USER_DEFAULT_DEVICE_LIMIT, no more than the creator's.
   */
  private async creationRules(identity: IdentityPort, creator: UserRecord, body: UserFields): Promise<number> {
    const asked = body.deviceLimit;
    const defaultLimit = body.administrator || (body.userLimit ?? 0) !== 0 ? -1 : this.defaultDeviceLimit;
    if (creator.administrator) return asked ?? defaultLimit;
    if (!this.access.isManager(creator)) throw refuse.forbidden('Only administrators and managers create users.');
    if (body.administrator || (body.userLimit ?? 0) !== 0) {
      throw refuse.forbidden('Managers create ordinary users only (no administrator, userLimit 0).');
    }
    if (body.createIncidents) throw refuse.forbidden('Only an administrator may change `createIncidents`.');
    if (creator.userLimit !== -1 && (await identity.managedUserIds(creator.id)).length >= creator.userLimit) {
      throw refuse.forbidden(`This manager's userLimit (${creator.userLimit}) is reached.`);
    }
    if (asked === undefined) return withinDeviceLimit(defaultLimit, creator.deviceLimit) ? defaultLimit : creator.deviceLimit;
    if (!withinDeviceLimit(asked, creator.deviceLimit)) {
      throw refuse.forbidden(`A manager gives no more devices than its own deviceLimit (${creator.deviceLimit}).`);
    }
    return asked;
  }

  async create(p: Principal, body: UserFields & { name: string; email: string; password: string }): Promise<UserRecord> {
    const me = p.user;
    checkEmail(body.email);
    requireWritable(p);
    await this.creationRules(this.identity, me, body); // refused before the password is hashed, when it can be told now
    // bounded like a login's check, in the caller's own share of the queue (503 busy when full)
    const passwordHash = await hashPassword(body.password, `set\u0000${me.id}`);
    try {
      return await this.identity.transaction(async (tx) => {
        // decided again where the user is written: parallel creates all passed the check above
        const creator = await tx.userById(me.id);
        if (!creator) throw refuse.unauthorized();
        const deviceLimit = await this.creationRules(tx, creator, body);
        const user = await tx.insertUser({ ...columns(body), deviceLimit, name: body.name, email: body.email, passwordHash });
        if (!creator.administrator) await tx.linkManagedUser(creator.id, user.id);
        return user;
      });
    } catch (err) {
      if (err instanceof UniqueViolation) throw emailTaken();
      throw err;
    }
  }

  async update(p: Principal, id: number, body: UserFields): Promise<UserRecord> {
    const me = p.user;
    checkEmail(body.email);
    const target = await this.identity.userById(id);
    if (!target) throw refuse.notFound(`No user ${id}.`);
    requireWritable(p);
    const isSelf = me.id === target.id;
    if (!isSelf && !(await this.access.canManageUser(me, target))) throw refuse.forbidden('You may not change this user.');
    const changes = columns(body);
    if (!me.administrator) {
      for (const field of PRIVILEGED) {
        if (changes[field] === undefined || changes[field] === target[field]) continue;
        if (isSelf || MANAGER_MAY_NOT.has(field)) throw refuse.forbidden(`Only an administrator may change \`${field}\`.`);
      }
      if (isSelf && target.fixedEmail && changes.email !== undefined && emailKey(changes.email) !== target.emailKey) {
        throw refuse.forbidden('This user\'s email is fixed (fixedEmail): only an administrator or its manager may change it.');
      }
      if (!isSelf && changes.deviceLimit !== undefined && changes.deviceLimit !== target.deviceLimit && !withinDeviceLimit(changes.deviceLimit, me.deviceLimit)) {
        throw refuse.forbidden(`A manager gives no more devices than its own deviceLimit (${me.deviceLimit}).`);
      }
    }
    const passwordHash = body.password !== undefined ? await hashPassword(body.password, `set\u0000${me.id}`) : undefined;
    try {
      return await this.identity.transaction(async (tx) => {
        // decided on the user as it is now (hashing the password above took time), inside the
        // transaction that writes: the last working administrator may not stop being one, nor
        // be given an expiry, which would end it later
        const current = await tx.userById(target.id);
        if (!current) throw refuse.notFound(`No user ${target.id}.`);
        const after = { ...current, ...changes };
        const newExpiry = after.expirationTime !== null && after.expirationTime !== current.expirationTime;
        const losesAdministration = this.administers(current) && (!this.administers(after) || newExpiry);
        if (losesAdministration && (await this.otherAdministrators(tx, target.id)) === 0) {
          throw new Refused(
            'LAST_ADMINISTRATOR',
            'This is the last working administrator: it cannot be demoted, disabled, made readonly or given an expirationTime.',
          );
        }
        const user = await tx.updateUser(target.id, { ...changes, ...(passwordHash ? { passwordHash } : {}) });
        if (user.disabled && !current.disabled) await tx.deleteSessionsOf(user.id);
        else if (passwordHash) await tx.deleteSessionsOf(user.id, isSelf ? p.session?.id : undefined);
        // a new password withdraws every credential the old one could have minted
        if (passwordHash) await tx.revokeUserTokens(user.id, this.clock.now().toISOString());
        return user;
      });
    } catch (err) {
      if (err instanceof UniqueViolation) throw emailTaken();
      throw err;
    }
  }

  async delete(p: Principal, id: number): Promise<UserRecord> {
    const me = p.user;
    const target = await this.identity.userById(id);
    if (!target) throw refuse.notFound(`No user ${id}.`);
    requireWritable(p);
    if (!(await this.access.canManageUser(me, target))) throw refuse.forbidden('You may not delete this user.');
    await this.identity.transaction(async (tx) => {
      if (this.administers(target) && (await this.otherAdministrators(tx, target.id)) === 0) {
        throw new Refused('LAST_ADMINISTRATOR', 'This is the last working administrator: it cannot be deleted.');
      }
      await tx.deleteUser(target.id);
    });
    return target;
  }
}

// User administration with Traccar's shapes and DESIGN section 4's rules.
import { hashPassword } from '../../auth/secrets.js';
import { UniqueViolation, type UserRecord } from '../../adapters/sqlite/identity.js';
import { caller } from '../security.js';
import { problems } from '../problem.js';
import { publicUser } from '../mappers.js';
import { utc } from '../../clock.js';
import type { Handler, Schemas } from '../types.js';
import { requireWritable, type Context } from './context.js';

type UserFields = Schemas['UserFields'];

/** settings only an administrator (or, except `administrator` and `userLimit`, a manager of the user) may change */
const PRIVILEGED = ['administrator', 'readonly', 'disabled', 'expirationTime', 'deviceLimit', 'userLimit', 'deviceReadonly', 'limitCommands', 'fixedEmail'] as const;
const MANAGER_MAY_NOT = new Set<string>(['administrator', 'userLimit']);

// An email that only looks like another: invisible and format characters (U+200B, bidi
// controls, soft hyphen, BOM), control characters, any space or separator, private-use,
// unassigned and surrogate code points. Letters of any script are fine.
const LOOK_ALIKE = /[\p{Cc}\p{Cf}\p{Z}\p{Co}\p{Cn}\p{Cs}\p{Default_Ignorable_Code_Point}]/u;

/** 400 for an email with characters that hide what it is */
function checkEmail(email: string | undefined): void {
  if (email === undefined || !LOOK_ALIKE.test(email)) return;
  throw problems.badRequest('`email` must not contain spaces, invisible, format or control characters.', [
    { path: '/body/email', message: 'must not contain spaces, invisible, format or control characters' },
  ]);
}

const emailKey = (email: string) => email.trim().toLowerCase();

/** may a creator with this deviceLimit give `limit` to a user (-1: unlimited)? */
function withinDeviceLimit(limit: number, creatorLimit: number): boolean {
  return creatorLimit === -1 || (limit !== -1 && limit <= creatorLimit);
}

function columns(body: UserFields): Partial<Omit<UserRecord, 'id' | 'emailKey' | 'passwordHash'>> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    if (k === 'password' || k === 'id' || v === undefined) continue;
    if (k === 'attributes') out.attributes = JSON.stringify(v);
    else if (k === 'expirationTime') out.expirationTime = utc(v as string | null);
    else out[k] = v;
  }
  return out as Partial<Omit<UserRecord, 'id' | 'emailKey' | 'passwordHash'>>;
}

function emailTaken(): never {
  throw problems.conflict('email-taken', 'Another user already has this email.');
}

export class UserHandlers {
  constructor(private readonly ctx: Context) {}

  /** can this user administer now (enabled, writable, not expired)? */
  private administers(u: Pick<UserRecord, 'administrator' | 'readonly' | 'disabled' | 'expirationTime'>): boolean {
    return u.administrator && !u.readonly && this.ctx.auth.usable(u);
  }

  private otherAdministrators(exceptId: number): number {
    return this.ctx.identity.countWorkingAdministrators(this.ctx.clock.now().toISOString(), exceptId);
  }

  listUsers: Handler<'listUsers'> = async (req) => {
    const me = caller(req).user;
    const { userId } = req.query;
    if (userId !== undefined) {
      if (!me.administrator && !(userId === me.id || (this.ctx.access.isManager(me) && this.ctx.identity.manages(me.id, userId)))) {
        throw problems.forbidden('Only administrators, or the manager of that user, may list the users it manages.');
      }
      return this.ctx.identity.listUsers(this.ctx.identity.managedUserIds(userId)).map(publicUser);
    }
    if (me.administrator) return this.ctx.identity.listUsers().map(publicUser);
    return this.ctx.identity.listUsers(this.ctx.access.visibleOwnerIds(me)).map(publicUser);
  };

  getUser: Handler<'getUser'> = async (req) => {
    const me = caller(req).user;
    const target = this.ctx.identity.userById(req.params.id);
    if (!target) throw problems.notFound(`No user ${req.params.id}.`);
    if (!this.ctx.access.canSeeUser(me, target.id)) throw problems.forbidden('You may not see this user.');
    return publicUser(target);
  };

  /**
   * The deviceLimit the new user gets, after 403 when a manager may not create it: managers
   * create ordinary users, up to their userLimit, who create no more devices than they may.
   * Without one in the body: unlimited for a new administrator or manager (only an
   * administrator creates those), else USER_DEFAULT_DEVICE_LIMIT, no more than the creator's.
   */
  private creationRules(creator: UserRecord, body: UserFields): number {
    const asked = body.deviceLimit;
    const defaultLimit = body.administrator || (body.userLimit ?? 0) !== 0 ? -1 : this.ctx.config.userDefaultDeviceLimit;
    if (creator.administrator) return asked ?? defaultLimit;
    if (!this.ctx.access.isManager(creator)) throw problems.forbidden('Only administrators and managers create users.');
    if (body.administrator || (body.userLimit ?? 0) !== 0) {
      throw problems.forbidden('Managers create ordinary users only (no administrator, userLimit 0).');
    }
    if (creator.userLimit !== -1 && this.ctx.identity.managedUserIds(creator.id).length >= creator.userLimit) {
      throw problems.forbidden(`This manager's userLimit (${creator.userLimit}) is reached.`);
    }
    if (asked === undefined) return withinDeviceLimit(defaultLimit, creator.deviceLimit) ? defaultLimit : creator.deviceLimit;
    if (!withinDeviceLimit(asked, creator.deviceLimit)) {
      throw problems.forbidden(`A manager gives no more devices than its own deviceLimit (${creator.deviceLimit}).`);
    }
    return asked;
  }

  createUser: Handler<'createUser'> = async (req) => {
    const p = caller(req);
    const me = p.user;
    const body = req.body;
    checkEmail(body.email);
    requireWritable(p);
    this.creationRules(me, body); // refused before the password is hashed, when it can be told now
    // bounded like a login's check, in the caller's own share of the queue (503 busy when full)
    const passwordHash = await hashPassword(body.password, `set\u0000${me.id}`);
    try {
      const created = this.ctx.identity.transaction(() => {
        // decided again where the user is written: parallel creates all passed the check above
        const creator = this.ctx.identity.userById(me.id);
        if (!creator) throw problems.unauthorized();
        const deviceLimit = this.creationRules(creator, body);
        const user = this.ctx.identity.insertUser({ ...columns(body), deviceLimit, name: body.name, email: body.email, passwordHash });
        if (!creator.administrator) this.ctx.identity.linkManagedUser(creator.id, user.id);
        return user;
      });
      req.log.info({ userId: created.id, by: me.id }, 'user created');
      return publicUser(created);
    } catch (err) {
      if (err instanceof UniqueViolation) emailTaken();
      throw err;
    }
  };

  updateUser: Handler<'updateUser'> = async (req) => {
    const p = caller(req);
    const me = p.user;
    checkEmail(req.body.email);
    const target = this.ctx.identity.userById(req.params.id);
    if (!target) throw problems.notFound(`No user ${req.params.id}.`);
    requireWritable(p);
    const isSelf = me.id === target.id;
    if (!isSelf && !this.ctx.access.canManageUser(me, target)) throw problems.forbidden('You may not change this user.');
    const body = req.body;
    const changes = columns(body);
    if (!me.administrator) {
      for (const field of PRIVILEGED) {
        if (changes[field] === undefined || changes[field] === target[field]) continue;
        if (isSelf || MANAGER_MAY_NOT.has(field)) throw problems.forbidden(`Only an administrator may change \`${field}\`.`);
      }
      if (isSelf && target.fixedEmail && changes.email !== undefined && emailKey(changes.email) !== target.emailKey) {
        throw problems.forbidden('This user\'s email is fixed (fixedEmail): only an administrator or its manager may change it.');
      }
      if (!isSelf && changes.deviceLimit !== undefined && changes.deviceLimit !== target.deviceLimit && !withinDeviceLimit(changes.deviceLimit, me.deviceLimit)) {
        throw problems.forbidden(`A manager gives no more devices than its own deviceLimit (${me.deviceLimit}).`);
      }
    }
    const passwordHash = body.password !== undefined ? await hashPassword(body.password, `set\u0000${me.id}`) : undefined;
    try {
      const updated = this.ctx.identity.transaction(() => {
        // decided on the user as it is now (hashing the password above took time), inside the
        // transaction that writes: the last working administrator may not stop being one, nor
        // be given an expiry, which would end it later
        const current = this.ctx.identity.userById(target.id);
        if (!current) throw problems.notFound(`No user ${target.id}.`);
        const after = { ...current, ...changes };
        const newExpiry = after.expirationTime !== null && after.expirationTime !== current.expirationTime;
        const losesAdministration = this.administers(current) && (!this.administers(after) || newExpiry);
        if (losesAdministration && this.otherAdministrators(target.id) === 0) {
          throw problems.conflict(
            'last-administrator',
            'This is the last working administrator: it cannot be demoted, disabled, made readonly or given an expirationTime.',
          );
        }
        const user = this.ctx.identity.updateUser(target.id, { ...changes, ...(passwordHash ? { passwordHash } : {}) });
        if (user.disabled && !current.disabled) this.ctx.identity.deleteSessionsOf(user.id);
        else if (passwordHash) this.ctx.identity.deleteSessionsOf(user.id, isSelf ? p.session?.id : undefined);
        // a new password withdraws every credential the old one could have minted
        if (passwordHash) this.ctx.identity.revokeUserTokens(user.id, this.ctx.clock.now().toISOString());
        return user;
      });
      req.log.info({ userId: updated.id, by: me.id }, 'user updated');
      return publicUser(updated);
    } catch (err) {
      if (err instanceof UniqueViolation) emailTaken();
      throw err;
    }
  };

  deleteUser: Handler<'deleteUser'> = async (req, reply) => {
    const p = caller(req);
    const me = p.user;
    const target = this.ctx.identity.userById(req.params.id);
    if (!target) throw problems.notFound(`No user ${req.params.id}.`);
    requireWritable(p);
    if (!this.ctx.access.canManageUser(me, target)) throw problems.forbidden('You may not delete this user.');
    this.ctx.identity.transaction(() => {
      if (this.administers(target) && this.otherAdministrators(target.id) === 0) {
        throw problems.conflict('last-administrator', 'This is the last working administrator: it cannot be deleted.');
      }
      this.ctx.identity.deleteUser(target.id);
    });
    req.log.info({ userId: target.id, by: me.id }, 'user deleted');
    return reply.code(204).send();
  };
}

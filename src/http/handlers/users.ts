// User administration with Traccar's shapes and DESIGN section 4's rules.
import { hashPassword } from '../../auth/secrets.js';
import { UniqueViolation, type UserRecord } from '../../store/identity.js';
import { caller } from '../security.js';
import { problems } from '../problem.js';
import { publicUser } from '../mappers.js';
import { utc } from '../../clock.js';
import type { Handler, Schemas } from '../types.js';
import { requireWritable, type Context } from './context.js';

type UserFields = Schemas['UserFields'];

/** settings only an administrator (or, except `administrator` and `userLimit`, a manager of the user) may change */
const PRIVILEGED = ['administrator', 'readonly', 'disabled', 'expirationTime', 'deviceLimit', 'userLimit', 'deviceReadonly', 'limitCommands'] as const;
const MANAGER_MAY_NOT = new Set<string>(['administrator', 'userLimit']);

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

  createUser: Handler<'createUser'> = async (req) => {
    const p = caller(req);
    const me = p.user;
    requireWritable(p);
    const body = req.body;
    if (!me.administrator) {
      if (!this.ctx.access.isManager(me)) throw problems.forbidden('Only administrators and managers create users.');
      if (body.administrator || (body.userLimit ?? 0) !== 0) {
        throw problems.forbidden('Managers create ordinary users only (no administrator, userLimit 0).');
      }
      if (me.userLimit !== -1 && this.ctx.identity.managedUserIds(me.id).length >= me.userLimit) {
        throw problems.forbidden(`This manager's userLimit (${me.userLimit}) is reached.`);
      }
    }
    const passwordHash = await hashPassword(body.password);
        try {
      const created = this.ctx.identity.transaction(() => {
        const user = this.ctx.identity.insertUser({ ...columns(body), name: body.name, email: body.email, passwordHash });
        if (!me.administrator) this.ctx.identity.linkManagedUser(me.id, user.id);
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
    }
    const passwordHash = body.password !== undefined ? await hashPassword(body.password) : undefined;
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
        return user;
      });
      if (passwordHash || updated.disabled) this.ctx.auth.forgetCachedPasswords();
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
    this.ctx.auth.forgetCachedPasswords();
    req.log.info({ userId: target.id, by: me.id }, 'user deleted');
    return reply.code(204).send();
  };
}

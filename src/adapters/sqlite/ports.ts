// The identity and outbox ports over the synchronous SQLite repositories (identity.ts,
// pushes.ts). Each call answers at once (a settled promise).
//
// A transaction (IdentityPort.transaction) is BEGIN IMMEDIATE … COMMIT on the one connection,
// around a function that awaits nothing but the port it is handed: its calls answer at once,
// so it runs whole in the turn of the event loop it started in, and the group commit (which
// runs in turns of its own) never meets it. Calls made outside it while it is open (another
// request's, in the same turn) wait for it to end instead of joining it: a rollback must not
// take another caller's write with it. A call on the transaction's port after its turn ended
// is a programming error: it throws, and the transaction rolls back.
import type Database from 'better-sqlite3';
import type { IdentityPort } from '../../ports/identity.js';
import type { OutboxPort } from '../../ports/outbox.js';
import type { IdentityStore } from './identity.js';
import type { PushStore } from './pushes.js';
import type { WebhookStorePort } from '../../ports/webhooks.js';
import type { WebhookStore } from './webhooks.js';

/** the open identity transaction, which every other call on the connection waits for */
export class Gate {
  open: Promise<unknown> | null = null;
}

type Sync<T> = { [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : T[K] };

/** every method of `repo` named in `methods`, answering a promise, after `before` */
function asyncMethods<P>(repo: object, methods: readonly string[], before: () => Promise<unknown> | null): P {
  const out: Record<string, unknown> = {};
  for (const name of methods) {
    // looked up at each call, not bound once: what the repository's prototype says at the time
    const target = repo as Record<string, (...args: unknown[]) => unknown>;
    out[name] = (...args: unknown[]) => {
      const wait = before();
      const call = () => target[name]!(...args);
      return wait ? wait.then(call, call) : new Promise((resolve) => resolve(call()));
    };
  }
  return out as P;
}

const IDENTITY_METHODS = [
  'countUsers', 'countWorkingAdministrators', 'userById', 'userByEmail', 'listUsers', 'insertUser', 'updateUser', 'deleteUser',
  'managedUserIds', 'manages', 'linkManagedUser', 'unlinkManagedUser', 'reachesDevice', 'reachesIncident', 'devicesReachedAmong',
  'enabledAmong', 'reachToken', 'deviceById', 'countDevicesOf', 'listDevices', 'insertDevice', 'updateDevice', 'deleteDevice',
  'deviceOwners', 'linkDevice', 'unlinkDevice', 'linkIncident', 'unlinkIncident', 'insertToken', 'tokenById', 'tokenByHashValue',
  'revokeToken', 'revokeUserTokens', 'revokeDeviceTokens', 'listUserTokens', 'insertSession', 'sessionByHashValue', 'touchSession',
  'deleteSession', 'deleteSessionsIdleSince', 'deleteSessionsOf',
] as const satisfies readonly (keyof IdentityPort)[];

// every method of the port is listed: one missing from the list does not compile
type Missing = Exclude<keyof IdentityPort, (typeof IDENTITY_METHODS)[number] | 'generation' | 'transaction'>;
const allListed: [Missing] extends [never] ? true : Missing = true;
void allListed;

export function sqliteIdentity(repo: IdentityStore & Sync<Omit<IdentityPort, 'generation' | 'transaction'>>, sqlite: Database.Database, gate: Gate): IdentityPort {
  const outside = asyncMethods<Omit<IdentityPort, 'generation' | 'transaction'>>(repo, IDENTITY_METHODS, () => gate.open);
  const port: IdentityPort = {
    ...outside,
    get generation() {
      return repo.generation;
    },
    async transaction<T>(fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
      while (gate.open) await gate.open.catch(() => {});
      let live = true;
      let depth = 0;
      const turn = setImmediate(() => (live = false));
      const inside = asyncMethods<Omit<IdentityPort, 'generation' | 'transaction'>>(repo, IDENTITY_METHODS, () => {
        if (!live) throw new Error('an identity transaction awaited something other than its port: it is rolled back');
        return null;
      });
      const tx: IdentityPort = {
        ...inside,
        get generation() {
          return repo.generation;
        },
        // nested: a savepoint, so that a throw inside undoes only what it wrote
        transaction: async (inner) => {
          const name = `nested_${++depth}`;
          sqlite.exec(`SAVEPOINT ${name}`);
          try {
            const result = await inner(tx);
            sqlite.exec(`RELEASE ${name}`);
            return result;
          } catch (err) {
            if (sqlite.inTransaction) sqlite.exec(`ROLLBACK TO ${name}; RELEASE ${name}`);
            throw err;
          } finally {
            depth--;
          }
        },
      };
      sqlite.exec('BEGIN IMMEDIATE');
      const run = (async () => {
        try {
          const result = await fn(tx);
          if (!live) throw new Error('an identity transaction outlived its turn: it is rolled back');
          sqlite.exec('COMMIT');
          return result;
        } catch (err) {
          if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
          throw err;
        } finally {
          clearImmediate(turn);
        }
      })();
      gate.open = run;
      try {
        return await run;
      } finally {
        if (gate.open === run) gate.open = null;
      }
    },
  };
  return port;
}

const OUTBOX_METHODS = ['pendingAfter', 'markSent', 'ack', 'oldestUnacked', 'expireStep', 'setStatuses', 'resetPresence', 'countPending'] as const satisfies readonly (keyof OutboxPort)[];
type MissingOutbox = Exclude<keyof OutboxPort, (typeof OUTBOX_METHODS)[number]>;
const allOutbox: [MissingOutbox] extends [never] ? true : MissingOutbox = true;
void allOutbox;

export function sqliteOutbox(repo: PushStore, gate: Gate): OutboxPort {
  return asyncMethods<OutboxPort>(repo, OUTBOX_METHODS, () => gate.open);
}

const WEBHOOK_METHODS = ['create', 'get', 'list', 'update', 'delete', 'rotate', 'deliveries', 'countPending', 'redeliver', 'enqueue', 'claim', 'settle', 'release'] as const satisfies readonly (keyof WebhookStorePort)[];
type MissingWebhooks = Exclude<keyof WebhookStorePort, (typeof WEBHOOK_METHODS)[number]>;
const allWebhooks: [MissingWebhooks] extends [never] ? true : MissingWebhooks = true;
void allWebhooks;

export function sqliteWebhooks(repo: WebhookStore, gate: Gate): WebhookStorePort {
  return asyncMethods<WebhookStorePort>(repo, WEBHOOK_METHODS, () => gate.open);
}

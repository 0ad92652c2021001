// Password hashing (scrypt) and opaque random secrets (tokens, session ids) stored only as
// SHA-256 hashes: a database leak yields no usable credential.
import * as crypto from 'node:crypto';
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { addressKey } from '../domain/client-address.js';
import { takesPlace } from '../domain/fair-share.js';

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

/** A password check refused because the queue of checks is full: answer 503 busy. */
export class HashQueueFull extends Error {
  constructor(readonly retryAfterS: number) {
    super('too many password checks are waiting');
    this.name = 'HashQueueFull';
  }
}

export interface QueueLimits {
  /** tasks waiting, all keys together, past which a bounded task is refused */
  queueMax: number;
  /**
   * tasks waiting for one account, and for one address: the flood of one account, or of one
   * address over many accounts, cannot fill the queue for everyone
   */
  shareMax: number;
  /** a bounded task is refused when the measured run time says it would wait longer than this */
  maxWaitMs: number;
}

/** whose task it is: the account it checks, and the address that asked (none: a group of its own) */
export interface HashCaller {
  account: string;
  address?: string | undefined;
}

export interface Limited {
  /** runs the task when a slot is free, however long that takes */
  <T>(task: () => Promise<T>): Promise<T>;
  /**
   * Runs the task for `caller` (an account, alone: an address of its own) if it can start
   * within the limits; else rejects with HashQueueFull at once (the decision is taken
   * synchronously, in the call). A full queue makes room for a caller whose address or account
   * holds fewer places than the one holding the most: the newest task of that one is refused
   * HashQueueFull while it waits (it never runs).
   */
  bounded<T>(caller: string | HashCaller, task: () => Promise<T>): Promise<T>;
  /** tasks running, and waiting for a slot */
  load(): { running: number; queued: number };
  /** sets some limits; returns all of them as they were */
  setLimits(limits: Partial<QueueLimits>): QueueLimits;
}

const UNBOUNDED: QueueLimits = { queueMax: Infinity, shareMax: Infinity, maxWaitMs: Infinity };

/** a task waiting for a slot */
interface Waiting {
  address: string;
  account: string;
  /** arrival order: ties go to the earlier */
  seq: number;
  resume: () => void;
  /** gives its place to a newcomer: the task is refused (HashQueueFull) and never runs */
  refuse: () => void;
}

/**
 * Runs the tasks given to it, at most `n` at once. A free slot goes to the waiting task whose
 * address and account were both served least recently (the later of the two turns it last had;
 * never served comes first; ties in arrival order): a newcomer goes ahead of every address and
 * every account that has just had a turn. So a flood from one address, over one account or
 * many, delays another caller's task by at most one of its own, and so does the flood of one
 * account from many addresses.
 */
export function limitConcurrency(n: number, limits: Partial<QueueLimits> = {}, initialRunMs = 50): Limited {
  let current: QueueLimits = { ...UNBOUNDED, ...limits };
  let running = 0;
  const waiting: Waiting[] = [];
  let seq = 0;
  let turn = 0;
  // per address and per account with a task waiting or running: how many, and when its last
  // task started (0: none yet); forgotten when it has none, so bounded by the tasks held
  const addresses = new Map<string, { held: number; waiting: number; served: number }>();
  const accounts = new Map<string, { held: number; waiting: number; served: number }>();
  let runMs = initialRunMs; // a moving average of how long a task runs

  const entry = (map: typeof addresses, key: string) => {
    let e = map.get(key);
    if (!e) map.set(key, (e = { held: 0, waiting: 0, served: 0 }));
    return e;
  };
  const served = (address: string, account: string): void => {
    turn += 1;
    entry(addresses, address).served = turn;
    entry(accounts, account).served = turn;
  };
  const done = (address: string, account: string): void => {
    for (const [map, key] of [[addresses, address], [accounts, account]] as const) {
      const e = map.get(key)!;
      if (--e.held === 0) map.delete(key);
    }
  };
  const lastTurn = (w: Waiting): number => Math.max(addresses.get(w.address)!.served, accounts.get(w.account)!.served);

  const next = (): Waiting | undefined => {
    let best = -1;
    for (let i = 0; i < waiting.length; i++) {
      if (best < 0) {
        best = i;
        continue;
      }
      const a = lastTurn(waiting[i]!);
      const b = lastTurn(waiting[best]!);
      if (a < b || (a === b && waiting[i]!.seq < waiting[best]!.seq)) best = i;
    }
    if (best < 0) return undefined;
    const [w] = waiting.splice(best, 1);
    addresses.get(w!.address)!.waiting--;
    accounts.get(w!.account)!.waiting--;
    return w;
  };

  const run = async <T>(address: string, account: string, task: () => Promise<T>): Promise<T> => {
    entry(addresses, address).held++;
    entry(accounts, account).held++;
    if (running >= n) {
      addresses.get(address)!.waiting++;
      accounts.get(account)!.waiting++;
      try {
        await new Promise<void>((resume, reject) =>
          waiting.push({ address, account, seq: seq++, resume, refuse: () => reject(new HashQueueFull(retryAfterS())) }),
        );
      } catch (err) {
        done(address, account); // its place was taken (makeRoom): it never ran
        throw err;
      }
    } else {
      running++;
      served(address, account);
    }
    const started = performance.now();
    try {
      return await task();
    } finally {
      runMs += (performance.now() - started - runMs) / 5;
      done(address, account);
      const w = next();
      if (w) {
        served(w.address, w.account);
        w.resume(); // the slot passes straight to the next task
      } else running--;
    }
  };

  /**
   * At most how many waiting tasks start before a new one of (address, account). A task goes
   * ahead of it only when neither its address nor its account has had a turn since the new
   * task's own last had one: so each other address (and each other account) goes ahead at most
   * once per task of its own address or account that starts before it.
   */
  const ahead = (address: string, account: string): number => {
    const mine = (addresses.get(address)?.waiting ?? 0) + (accounts.get(account)?.waiting ?? 0);
    let othersA = 0;
    for (const [key, e] of addresses) if (e.waiting > 0 && key !== address) othersA++;
    let othersC = 0;
    for (const [key, e] of accounts) if (e.waiting > 0 && key !== account) othersC++;
    return Math.min(waiting.length, mine + (mine + 1) * Math.min(othersA, othersC));
  };

  /** the key holding the most places in the queue, and how many (tasks without a key aside) */
  const largest = (map: typeof addresses): [string, number] => {
    let top: [string, number] = ['', 0];
    for (const [key, e] of map) if (key !== '' && e.waiting > top[1]) top = [key, e.waiting];
    return top;
  };

  /**
   * The queue is full: a newcomer whose address (or account) waits in fewer places than the
   * address (account) holding the most takes the newest of that one's places (domain/fair-share.ts),
   * which is refused busy; whichever of the two is further over the newcomer's. Whether it did.
   */
  const makeRoom = (address: string, account: string): boolean => {
    const mineA = addresses.get(address)?.waiting ?? 0;
    const mineC = accounts.get(account)?.waiting ?? 0;
    const [topA, mostA] = largest(addresses);
    const [topC, mostC] = largest(accounts);
    const byAddress = takesPlace(mineA, mostA) && (!takesPlace(mineC, mostC) || mostA - mineA >= mostC - mineC);
    if (!byAddress && !takesPlace(mineC, mostC)) return false;
    for (let i = waiting.length - 1; i >= 0; i--) {
      const w = waiting[i]!;
      if (byAddress ? w.address !== topA : w.account !== topC) continue;
      waiting.splice(i, 1);
      addresses.get(w.address)!.waiting--;
      accounts.get(w.account)!.waiting--;
      w.refuse();
      return true;
    }
    return false;
  };

  const retryAfterS = (): number => Math.max(1, Math.ceil((waiting.length * runMs) / n / 1000));

  const bounded = <T>(caller: string | HashCaller, task: () => Promise<T>): Promise<T> => {
    const account = typeof caller === 'string' ? caller : caller.account;
    // no address: a group of its own (\u0000 is in no address)
    // an IPv6 address counts by its /64 (domain/client-address.ts)
    const address = typeof caller === 'string' || caller.address === undefined ? `\u0000${account}` : addressKey(caller.address);
    if (running >= n) {
      const refused =
        (accounts.get(account)?.waiting ?? 0) >= current.shareMax ||
        (addresses.get(address)?.waiting ?? 0) >= current.shareMax ||
        ((ahead(address, account) + 1) * runMs) / n > current.maxWaitMs ||
        (waiting.length >= current.queueMax && !makeRoom(address, account));
      if (refused) return Promise.reject(new HashQueueFull(retryAfterS()));
    }
    return run(address, account, task);
  };

  const limited = <T>(task: () => Promise<T>): Promise<T> => run('', '', task);
  return Object.assign(limited, {
    bounded,
    load: () => ({ running, queued: waiting.length }),
    setLimits: (next: Partial<QueueLimits>): QueueLimits => {
      const before = current;
      current = { ...current, ...next };
      return before;
    },
  });
}

// At most two password hashes at a time. Each holds a thread of libuv's pool (four) and a core
// for ~50 ms; the fsync that answers every incident write runs on that pool too
// (adapters/sqlite/engine/wal-sync.ts), and a burst of logins, or of wrong passwords, must not queue it.
//
// A login's check waits at most ~1 s: it is refused (503 busy) when the hashes ahead of it
// would take longer by the measured run time, or when 64 wait (measured here: 22 ms a hash
// alone, 25 ms two at a time, so 64 is ~0.8 s; at the ~50 ms of a slower machine the time
// bound admits 40). A free slot goes to the check whose address and account have waited
// longest since either had a turn (2026-11-29, issue 36): until then turns went by account
// only, so one address guessing at 200 unknown accounts held 200 turns, and a right login from
// elsewhere waited behind all of them, or was refused busy. One address, and one account
// whatever the address, has at most 8 checks waiting; past that, that caller alone is refused.
// It takes 8 flooding addresses (or accounts) to fill the queue, and a login from an address
// and for an account that have not just had a turn waits for at most one check of each flood:
// the time bound counts only those. A full queue does not refuse such a login (2026-11-29,
// issue 36): until then 8 addresses holding their 8 places each kept every other address's
// logins out (503 busy, indefinitely, and a busy refusal is no failure the throttle counts);
// now a check whose address (or account) waits in at least two fewer places than the address
// (account) holding the most takes the newest of that one's places, and that check is refused
// busy instead. So N flooding addresses end with 64/N places each, and a login from an address
// holding fewer gets in. Addresses count by their key (domain/client-address.ts: IPv6 by /64).
// Setting a password is bounded the same way, in the share of the user who sets it (an
// authenticated user changing its own password in a loop must not starve everyone's logins);
// only the first administrator's, at start, is not.
//
// Several nodes (DESIGN section 9; decided 2026-11-26): this queue stays per node, since what
// it bounds is the node's own CPU and thread pool, and a check queued on one node cannot run on
// another. What must not grow with the number of nodes is how many checks of one account, or
// from one address, are in flight: that bound is the login throttle's, which counts every
// attempt as pending before it reaches this queue, in the database when there are several nodes
// (adapters/postgres/login-throttle.ts): at most 5 per (account, address), 20 per account from
// addresses it has not logged in from, 50 per address, over all nodes together. A check this
// queue refuses (503 busy) is given back to the throttle, so a full queue on one node costs the
// account nothing on the others.
export const PASSWORD_CHECK_LIMITS: QueueLimits = { queueMax: 64, shareMax: 8, maxWaitMs: 1000 };
export const scryptSlots = limitConcurrency(2, PASSWORD_CHECK_LIMITS);

/** Sets some limits of the password-check queue (tests make it small); returns all as they were. */
export function setPasswordCheckLimits(limits: Partial<QueueLimits>): QueueLimits {
  return scryptSlots.setLimits(limits);
}

/**
 * `checkFor`: the account whose login this hash checks, and the address that asked (alone, a
 * key of its own: setting a password). Such a hash is bounded: it rejects with HashQueueFull,
 * before hashing, when the queue, that address's share or that account's share of it is full.
 */
function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions, checkFor?: string | HashCaller): Promise<Buffer> {
  const task = () =>
    new Promise<Buffer>((resolve, reject) => {
      scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key)));
    });
  return checkFor === undefined ? scryptSlots(task) : scryptSlots.bounded(checkFor, task);
}

/** Returns `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string, checkFor?: string | HashCaller): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFC'), salt, KEYLEN, { N, r: R, p: P }, checkFor);
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** `checkFor`: as for scrypt above (a login's check is bounded) */
export async function verifyPassword(password: string, stored: string, checkFor?: string | HashCaller): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password.normalize('NFC'), Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  }, checkFor);
  return timingSafeEqual(key, expected);
}

/** 256 random bits, URL-safe: the only form in which a token or session id is ever shown. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

// Node's one-shot crypto.hash (20.12 and later; @types/node 20 does not declare it): every
// bearer token is hashed on every request to find its row, and the one-shot call skips the
// Hash object (about 0.26 µs against 0.7 µs in a loop here, more in the service's heap).
const oneShot = (crypto as unknown as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

export function sha256(value: string): string {
  return oneShot ? oneShot('sha256', value, 'hex') : createHash('sha256').update(value).digest('hex');
}

const SECRET_RE = /^[A-Za-z0-9_-]{43}$/;
export function looksLikeSecret(value: string): boolean {
  return SECRET_RE.test(value);
}

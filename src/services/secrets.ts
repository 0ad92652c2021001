// Password hashing (scrypt) and opaque random secrets (tokens, session ids) stored only as
// SHA-256 hashes: a database leak yields no usable credential.
import * as crypto from 'node:crypto';
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

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
  /** tasks waiting for one key (one account): its flood cannot fill the queue for everyone */
  shareMax: number;
  /** a bounded task is refused when the measured run time says it would wait longer than this */
  maxWaitMs: number;
}

export interface Limited {
  /** runs the task when a slot is free, however long that takes */
  <T>(task: () => Promise<T>): Promise<T>;
  /**
   * Runs the task for `key` if it can start within the limits; else rejects with HashQueueFull
   * at once (the decision is taken synchronously, in the call).
   */
  bounded<T>(key: string, task: () => Promise<T>): Promise<T>;
  /** tasks running, and waiting for a slot */
  load(): { running: number; queued: number };
  /** sets some limits; returns all of them as they were */
  setLimits(limits: Partial<QueueLimits>): QueueLimits;
}

const UNBOUNDED: QueueLimits = { queueMax: Infinity, shareMax: Infinity, maxWaitMs: Infinity };

/**
 * Runs the tasks given to it, at most `n` at once. Waiting tasks take turns by key (round
 * robin), in arrival order within a key: a key with many tasks waiting delays another key's
 * task by at most one of its own per turn.
 */
export function limitConcurrency(n: number, limits: Partial<QueueLimits> = {}, initialRunMs = 50): Limited {
  let current: QueueLimits = { ...UNBOUNDED, ...limits };
  let running = 0;
  let queued = 0;
  // key -> its waiting tasks; the map's order is the order of turns
  const waiting = new Map<string, (() => void)[]>();
  let runMs = initialRunMs; // a moving average of how long a task runs

  const next = (): (() => void) | undefined => {
    const first = waiting.entries().next();
    if (first.done) return undefined;
    const [key, list] = first.value;
    const resume = list.shift()!;
    waiting.delete(key);
    if (list.length > 0) waiting.set(key, list); // to the back of the turns
    queued--;
    return resume;
  };

  const run = async <T>(key: string, task: () => Promise<T>): Promise<T> => {
    if (running >= n) {
      queued++;
      await new Promise<void>((resolve) => {
        const list = waiting.get(key);
        if (list) list.push(resolve);
        else waiting.set(key, [resolve]);
      });
    } else {
      running++;
    }
    const started = performance.now();
    try {
      return await task();
    } finally {
      runMs += (performance.now() - started - runMs) / 5;
      const resume = next();
      if (resume) resume(); // the slot passes straight to the next task
      else running--;
    }
  };

  const retryAfterS = (): number => Math.max(1, Math.ceil((queued * runMs) / n / 1000));

  const bounded = <T>(key: string, task: () => Promise<T>): Promise<T> => {
    if (running >= n) {
      const mine = waiting.get(key)?.length ?? 0;
      const waitMs = ((queued + 1) * runMs) / n;
      if (queued >= current.queueMax || mine >= current.shareMax || waitMs > current.maxWaitMs) {
        return Promise.reject(new HashQueueFull(retryAfterS()));
      }
    }
    return run(key, task);
  };

  const limited = <T>(task: () => Promise<T>): Promise<T> => run('', task);
  return Object.assign(limited, {
    bounded,
    load: () => ({ running, queued }),
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
// bound admits 40). One account has at most 8 checks waiting, so it takes 8 flooded accounts
// to fill the queue, and the turns between accounts let another account's check start after
// at most one of each flooded account's. Setting a password is bounded the same way, in the
// share of the user who sets it (an authenticated user changing its own password in a loop
// must not starve everyone's logins); only the first administrator's, at start, is not.
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
 * `checkFor`: the account whose login this hash checks. Such a hash is bounded: it rejects
 * with HashQueueFull, before hashing, when the queue or that account's share of it is full.
 */
function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions, checkFor?: string): Promise<Buffer> {
  const task = () =>
    new Promise<Buffer>((resolve, reject) => {
      scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key)));
    });
  return checkFor === undefined ? scryptSlots(task) : scryptSlots.bounded(checkFor, task);
}

/** Returns `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string, checkFor?: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFC'), salt, KEYLEN, { N, r: R, p: P }, checkFor);
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** `checkFor`: as for scrypt above (a login's check is bounded) */
export async function verifyPassword(password: string, stored: string, checkFor?: string): Promise<boolean> {
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

// Password hashing (scrypt) and opaque random secrets (tokens, session ids) stored only as
// SHA-256 hashes: a database leak yields no usable credential.
import * as crypto from 'node:crypto';
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

export interface Limited {
  <T>(task: () => Promise<T>): Promise<T>;
  /** tasks running, and waiting for a slot */
  load(): { running: number; queued: number };
}

/** runs the tasks given to it, at most `n` at once, in the order given */
export function limitConcurrency(n: number): Limited {
  let running = 0;
  const waiting: (() => void)[] = [];
  const limited = async <T>(task: () => Promise<T>): Promise<T> => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next(); // the slot passes straight to the next task
      else running--;
    }
  };
  return Object.assign(limited, { load: () => ({ running, queued: waiting.length }) });
}

// At most two password hashes at a time. Each holds a thread of libuv's pool (four) and a core
// for ~50 ms; the fsync that answers every incident write runs on that pool too
// (store/wal-sync.ts), and a burst of logins, or of wrong passwords, must not queue it.
export const scryptSlots = limitConcurrency(2);

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return scryptSlots(
    () =>
      new Promise((resolve, reject) => {
        scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key)));
      }),
  );
}

/** Returns `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFC'), salt, KEYLEN, { N, r: R, p: P });
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password.normalize('NFC'), Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  });
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

// Seeds a fresh database for the benchmark straight through the store's tables (fast):
// N devices whose callsigns are shared by 1-3 devices, and an integration user reaching all.
// seed() writes a SQLite file; seedPostgres() the same rows into a migrated PostgreSQL database.
import pg from 'pg';
import { callsignKey } from '../../src/domain/callsign.js';
import { hashPassword } from '../../src/services/secrets.js';
import { openDatabase, type Db } from '../../src/adapters/sqlite/db.js';
import type { UserRecord } from '../../src/ports/identity.js';

export const BENCH_USER = { email: 'cad@bench.test', password: 'bench-password' };

/**
 * returns callsigns that have exactly 2 devices (for the "3 callsigns × 2 devices" create),
 * and the ids of each callsign's devices
 */
export async function seed(path: string, devices: number): Promise<{ pairCallsigns: string[]; singleCallsigns: string[]; devicesOf: Map<string, number[]> }> {
  const db: Db = openDatabase({ path, synchronous: 'OFF' });
  const sqlite = db.$client;
  const hash = await hashPassword(BENCH_USER.password);
  const pairCallsigns: string[] = [];
  const singleCallsigns: string[] = [];
  const devicesOf = new Map<string, number[]>();
  sqlite.transaction(() => {
    const user = sqlite
      .prepare(`INSERT INTO users (name, email, email_key, password_hash, device_limit, user_limit, create_incidents) VALUES ('CAD', ?, ?, ?, -1, 0, 1)`)
      .run(BENCH_USER.email, BENCH_USER.email, hash).lastInsertRowid;
    const insDevice = sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`);
    const link = sqlite.prepare(`INSERT INTO user_devices (user_id, device_id) VALUES (?, ?)`);
    let made = 0;
    for (const { name, size } of callsignGroups(devices)) {
      if (size === 2) pairCallsigns.push(name);
      if (size === 1) singleCallsigns.push(name);
      const ids: number[] = [];
      devicesOf.set(name, ids);
      for (let i = 0; i < size; i++) {
        const id = insDevice.run(name, callsignKey(name), `bench-${made}`).lastInsertRowid;
        link.run(user, id);
        ids.push(Number(id));
        made++;
      }
    }
  })();
  sqlite.close();
  return { pairCallsigns, singleCallsigns, devicesOf };
}

/** the seeded integration user, as the incident store takes its caller (for in-process runs) */
export function benchCaller(db: Db): UserRecord {
  const user = db.$client.prepare('SELECT * FROM users WHERE email = ?').get(BENCH_USER.email) as Record<string, unknown>;
  return { ...user, administrator: false, readonly: false, createIncidents: true, id: user.id as number } as unknown as UserRecord;
}

/** three consecutive callsigns of `list` from position k (wrapping): 3 callsigns x 2 devices */
export function threeCallsigns(list: readonly string[], k: number): string[] {
  return [0, 1, 2].map((j) => list[(k + j) % list.length]!);
}

/** a token of the bench user (BENCH_USER) from the service at `base` */
export async function benchBearer(base: string): Promise<string> {
  const basic = `Basic ${Buffer.from(`${BENCH_USER.email}:${BENCH_USER.password}`).toString('base64')}`;
  const r = await fetch(`${base}/api/session/token`, { method: 'POST', headers: { authorization: basic } });
  if (r.status !== 200) throw new Error(`a token for the bench user: HTTP ${r.status} ${await r.text()}`);
  return r.text();
}

/**
 * The bodies every throughput part sends, over the seed's callsigns (`pairCallsigns`): creates
 * naming callsigns n, n+1, n+2 (consecutive creates share two of three); `targets` incidents to
 * update and read, created with targetBody(i); updates that move each target by one callsign in
 * turn; and GET paths that walk the targets' ids.
 */
export function benchWorkload(pairCallsigns: readonly string[], run: string, targets = 500) {
  let n = 0;
  const three = (k: number) => threeCallsigns(pairCallsigns, k);
  const createBody = () => {
    n++;
    return { originId: `${run}-${n}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: three(n) };
  };
  const targetBody = (i: number) => ({ ...createBody(), originId: `${run}-t${i}`, resources: three(i * 3) });
  const version = new Array<number>(targets).fill(0);
  let u = 0;
  const updateBody = () => {
    const i = u++ % targets;
    version[i]! += 1;
    return { originId: `${run}-t${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources: three(i * 3 + version[i]!) };
  };
  const incidentPaths = (ids: readonly number[]) => {
    let g = 0;
    return () => `/api/incidents/${ids[g++ % ids.length]}`;
  };
  return { targets, three, createBody, targetBody, updateBody, incidentPaths };
}

/** one callsign of the seed and how many devices carry it */
export interface CallsignGroup {
  name: string;
  size: number;
}

/**
 * The seed's callsigns for `devices` devices, as seed() lays them out: U0, U1, U2, … carried by
 * 1, 2, 3, 1, 2, 3 … devices in turn (the last by fewer if the devices run out).
 */
export function callsignGroups(devices: number): CallsignGroup[] {
  const out: CallsignGroup[] = [];
  for (let made = 0, group = 0; made < devices; group++) {
    const size = Math.min(devices - made, 1 + (group % 3));
    out.push({ name: `U${group}`, size });
    made += size;
  }
  return out;
}

/**
 * seed()'s rows in a PostgreSQL database already migrated (`url`): the integration user,
 * `devices` devices laid out by callsignGroups, each linked to the user. Three statements, each
 * over arrays (unnest), so 10 000 devices take a second, not 20 000 round trips; then ANALYZE.
 */
export async function seedPostgres(url: string, devices: number): Promise<{ pairCallsigns: string[]; singleCallsigns: string[]; devicesOf: Map<string, number[]> }> {
  const hash = await hashPassword(BENCH_USER.password);
  const groups = callsignGroups(devices);
  const names: string[] = [];
  const keys: string[] = [];
  const uniqueIds: string[] = [];
  for (const g of groups) {
    for (let i = 0; i < g.size; i++) {
      names.push(g.name);
      keys.push(callsignKey(g.name));
      uniqueIds.push(`bench-${uniqueIds.length}`);
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const idOf = new Map<string, number>();
  try {
    await client.query('BEGIN');
    const user = await client.query<{ id: string }>(
      `INSERT INTO users (name, email, email_key, password_hash, device_limit, user_limit, create_incidents) VALUES ('CAD', $1, $1, $2, -1, 0, true) RETURNING id`,
      [BENCH_USER.email, hash],
    );
    const made = await client.query<{ id: string; unique_id: string }>(
      `INSERT INTO devices (name, name_key, unique_id) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) RETURNING id, unique_id`,
      [names, keys, uniqueIds],
    );
    for (const r of made.rows) idOf.set(r.unique_id, Number(r.id));
    await client.query(`INSERT INTO user_devices (user_id, device_id) SELECT $1, unnest($2::bigint[])`, [user.rows[0]!.id, [...idOf.values()]]);
    await client.query('COMMIT');
    // the planner's statistics, as autovacuum would have them a minute later: without them the
    // first creates on a freshly seeded database matched callsigns through a plan 20 times slower
    // (1.7 against 0.08 ms per match, 2026-11-26)
    await client.query('ANALYZE');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
  const pairCallsigns: string[] = [];
  const singleCallsigns: string[] = [];
  const devicesOf = new Map<string, number[]>();
  let k = 0;
  for (const g of groups) {
    if (g.size === 2) pairCallsigns.push(g.name);
    if (g.size === 1) singleCallsigns.push(g.name);
    devicesOf.set(g.name, Array.from({ length: g.size }, () => idOf.get(uniqueIds[k++]!)!));
  }
  return { pairCallsigns, singleCallsigns, devicesOf };
}

// A full disk under the real server (DESIGN section 7): writes answer 503 storage-unavailable
// with Retry-After and store nothing, reads keep working, /api/health says so, and once space
// returns writes and checkpoints resume by themselves; every incident answered 2xx is there
// after a restart.
//
// The disk is a small tmpfs filled with a filler file. Where mounting is refused, the fault is
// made inside the server process instead (a preload sets SQLite's max_page_count to the
// database's size and makes statfs report no free space while a control file says "full");
// the test output names the one that ran.
import t, { type Test } from 'tap';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/paths.js';
import { until } from '../fixtures/sockets.js';
import { freePort, untilServing } from '../fixtures/server-process.js';

const ADMIN = { email: 'full-disk@example.test', password: 'full-disk-password' };
const auth = `Basic ${Buffer.from(`${ADMIN.email}:${ADMIN.password}`).toString('base64')}`;


/** The fault-injecting preload of the fallback: runs in the server process before main.ts. */
const PRELOAD = `
import { createRequire, syncBuiltinESMExports } from 'node:module';
import fs from 'node:fs';
const require = createRequire(${JSON.stringify(join(projectRoot, 'package.json'))});
const control = process.env.FULL_DISK_CONTROL;
const full = () => { try { return fs.readFileSync(control, 'utf8') === 'full'; } catch { return false; } };
const Database = require('better-sqlite3');
// every connection that runs a pragma (the server's does at once: db.ts) is tracked
const connections = new Set();
const pragma = Database.prototype.pragma;
Database.prototype.pragma = function (...args) {
  connections.add(this);
  return pragma.apply(this, args);
};
let was = false;
setInterval(() => {
  const now = full();
  if (now === was) return;
  was = now;
  for (const db of connections) {
    if (!db.open || db.memory) continue;
    pragma.call(db, 'max_page_count = ' + (now ? pragma.call(db, 'page_count', { simple: true }) : 4294967294));
  }
}, 20).unref();
const statfsSync = fs.statfsSync;
fs.statfsSync = (...args) => {
  const s = statfsSync(...args);
  return full() ? { ...s, bfree: 0, bavail: 0 } : s;
};
syncBuiltinESMExports();
`;

interface Disk {
  mode: 'tmpfs' | 'max_page_count';
  dir: string;
  /** extra arguments for node and environment for the server */
  node: string[];
  env: Record<string, string>;
  fill(): void;
  free(): void;
}

function makeDisk(t: Test): Disk {
  const base = mkdtempSync(join(tmpdir(), 'cad-full-disk-'));
  const dir = join(base, 'disk');
  mkdirSync(dir);
  const filler = join(dir, 'filler');
  let mounted = false;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', dir], { stdio: 'pipe' });
    mounted = true;
  } catch (err) {
    t.comment(`mount refused (${(err as Error).message.split('\n')[0]}); falling back to a fault inside the server process`);
  }
  t.teardown(() => {
    if (mounted) {
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
    }
    rmSync(base, { recursive: true, force: true });
  });
  if (mounted) {
    t.comment('full disk: a 16 MiB tmpfs filled by a filler file');
    return {
      mode: 'tmpfs',
      dir,
      node: [],
      env: {},
      fill() {
        const fd = openSync(filler, 'w');
        try {
          for (const size of [1 << 20, 1 << 16, 1 << 12, 512, 1]) {
            const chunk = Buffer.alloc(size, 0xaa);
            try {
              for (;;) writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
            }
          }
        } finally {
          closeSync(fd);
        }
      },
      free() {
        rmSync(filler);
      },
    };
  }
  t.comment('full disk: SQLite max_page_count and statfs faked inside the server process (no tmpfs)');
  const control = join(base, 'control');
  const preload = join(base, 'preload.mjs');
  writeFileSync(preload, PRELOAD);
  writeFileSync(control, 'free');
  return {
    mode: 'max_page_count',
    dir,
    node: ['--import', pathToFileURL(preload).href],
    env: { FULL_DISK_CONTROL: control },
    fill: () => writeFileSync(control, 'full'),
    free: () => writeFileSync(control, 'free'),
  };
}

interface Server {
  child: ChildProcess;
  port: number;
  /** the server's log so far (JSON lines) */
  log: () => string;
}

async function start(t: Test, disk: Disk, port: number): Promise<Server> {
  const child = spawn(process.execPath, [...disk.node, '--import', 'tsx', 'src/main.ts'], {
    cwd: projectRoot,
    env: {
      ...process.env,
      ...disk.env,
      DATABASE_PATH: join(disk.dir, 'cad.sqlite'),
      PORT: String(port),
      HOST: '127.0.0.1',
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => {
    log += d.toString();
  });
  const exited = new Promise((r) => child.once('exit', r));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  await untilServing(port);
  return { child, port, log: () => log };
}

interface Answer {
  status: number;
  type: string | null;
  retryAfter: string | null;
  body: any;
}

async function api(port: number, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${port}/api${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  const type = res.headers.get('content-type');
  return { status: res.status, type, retryAfter: res.headers.get('retry-after'), body: text && type?.includes('json') ? JSON.parse(text) : text };
}

const incident = (originId: string) => ({
  originId,
  type: 'FIRE',
  latitude: 47.5,
  longitude: 8.7,
  priority: 1,
  description: `${originId} `.repeat(30).slice(0, 250),
  resources: ['E1', 'L2'],
});

const STORAGE_UNAVAILABLE = 'urn:cad-incident:problem:storage-unavailable';

t.test('when the database disk is full, then writes answer 503 storage-unavailable, reads and health say so, and everything resumes once space returns', async (t) => {
  const disk = makeDisk(t);
  const port = await freePort();
  const server = await start(t, disk, port);
  const dbFile = join(disk.dir, 'cad.sqlite');

  /** every incident answered 2xx, and every one refused */
  const stored = new Set<string>();
  const refused = new Set<string>();
  let n = 0;
  /** a write, which must be stored (2xx) or refused as storage-unavailable (503, Retry-After), never anything else */
  const write = async (method: string, path: string, body: { originId: string; [k: string]: unknown }): Promise<Answer> => {
    const res = await api(port, method, path, body);
    if (res.status === 200 || res.status === 202) stored.add(body.originId);
    else {
      t.equal(res.status, 503, `${method} ${path} ${body.originId}: 2xx or 503, not ${res.status} ${JSON.stringify(res.body)}`);
      t.match(res, { type: /^application\/problem\+json/, retryAfter: /^\d+$/, body: { type: STORAGE_UNAVAILABLE, status: 503 } }, 'storage-unavailable with Retry-After');
      if (method === 'POST') refused.add(body.originId);
    }
    return res;
  };

  for (let i = 0; i < 10; i++) t.equal((await write('POST', '/incidents', incident(`BEFORE-${i}`))).status, 202);
  const first = (await api(port, 'GET', '/incidents?originId=BEFORE-0')).body[0] as { id: number };

  /** writes until one is refused (at most `max`): whether one was */
  const refusedWithin = async (max: number, next: (i: number) => Promise<Answer>): Promise<boolean> => {
    for (let i = 0; i < max; i++) if ((await next(i)).status >= 300) return true;
    return false;
  };

  disk.fill();
  // The WAL may still have room for a few writes; from some write on, none fits.
  let refusedInARow = 0;
  for (let i = 0; refusedInARow < 3 && i < 2000; i++) {
    const res = await write('POST', '/incidents', incident(`FULL-${n++}`));
    refusedInARow = res.status >= 300 ? refusedInARow + 1 : 0;
  }
  t.equal(refusedInARow, 3, 'creates are refused once the disk is full');

  const health = await api(port, 'GET', '/health');
  t.equal(health.status, 503, 'health is not ready while writes fail');
  t.not(health.body.status, 'ok');
  t.match(server.log(), /"code":"SQLITE_FULL".*storage unavailable/, 'the log says why');

  // reads keep working
  const list = await api(port, 'GET', '/incidents?limit=1000');
  t.equal(list.status, 200, 'the list is read');
  t.ok(list.body.length >= 10);
  t.equal((await api(port, 'GET', `/incidents/${first.id}`)).status, 200, 'one incident is read');

  // updates (by id and by originId) answer 2xx or 503 storage-unavailable too (write() checks
  // each answer). Whether one is refused depends on where the WAL stands: after the checkpoint
  // thread lets it start over, frames are written over old ones and need no new space, so an
  // update may well be stored on a full disk; that is not asserted either way.
  const updated = (i: number) => ({ ...incident('BEFORE-0'), priority: 2 + (i % 3), resources: [`U${i}`, `V${i}`, `W${i}`] });
  const byId = await refusedWithin(50, (i) => write('PUT', `/incidents/${first.id}`, updated(i)));
  const byOrigin = await refusedWithin(50, (i) => write('PUT', '/incidents/update', { ...updated(i), originId: 'BEFORE-1' }));
  t.comment(`updates refused while full: by id ${byId}, by originId ${byOrigin}`);
  // as for updates, a WAL the checkpoint thread let start over has room in its old frames: creates
  // fill them first (a run on a loaded machine, 2026-11-26, stored 50 in a row), then one needs
  // new space and is refused (as many tries as the first refusal above was given)
  t.ok(await refusedWithin(2000, () => write('POST', '/incidents', incident(`FULL-${n++}`))), 'a create is refused again');
  t.equal((await api(port, 'GET', '/health')).status, 503, 'still not ready');
  t.equal(server.child.exitCode, null, 'the server keeps running');

  disk.free();
  // writes resume by themselves: no restart, no request other than the writes themselves
  await until(
    'a write stored again',
    async () => (await write('POST', '/incidents', incident(`AFTER-${n++}`))).status !== 503,
    10_000,
  );
  await until('health ready again', async () => (await api(port, 'GET', '/health')).status === 200, 10_000);
  for (let i = 0; i < 20; i++) t.equal((await write('POST', '/incidents', incident(`AFTER-${n++}`))).status, 202, 'stored once space has returned');
  if (disk.mode === 'tmpfs') {
    // A checkpoint pass that failed while the disk was full is tried again, and says so when
    // it succeeds. (Whether one failed depends on where the WAL stood, and whether the file
    // grows afterwards on whether the new pages fit in the old ones: neither is asserted; the
    // thread's restart itself is tested in test/adapters/sqlite/engine/checkpointer.test.ts.)
    if (/checkpoint failed/.test(server.log())) {
      await until('checkpoints that succeed again', () => /checkpoints succeed again/.test(server.log()), 10_000);
      t.pass('a failed checkpoint thread came back by itself');
    }
  }

  server.child.kill('SIGKILL');
  await new Promise((r) => server.child.once('exit', r));
  const again = await start(t, disk, port);
  const after = await api(again.port, 'GET', '/incidents?limit=1000');
  const ids = new Set((after.body as { originId: string }[]).map((i) => i.originId));
  t.same([...stored].filter((id) => !ids.has(id)), [], 'every incident answered 2xx is there after a restart');
  t.same([...refused].filter((id) => ids.has(id)), [], 'no incident answered 503 was stored');
  t.ok(refused.size >= 3 && stored.size >= 31, `${stored.size} stored, ${refused.size} refused`);
});

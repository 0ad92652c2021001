// The bench's account of which B-trees a commit wrote (scripts/bench/wal-frames.ts): read
// from a real WAL, and the arithmetic that turns pages into frames per operation.
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { framePages, framesByOwner, pageOwners, walFrameCount, walGeneration } from '../../scripts/bench/wal-frames.js';

function walDb(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'cad-wal-frames-'));
  const path = join(dir, 'db.sqlite');
  const sqlite = new Database(path);
  t.teardown(() => {
    if (sqlite.open) sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  });
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('wal_autocheckpoint = 0');
  sqlite.exec('CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE b (id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX b_v ON b (v)');
  const fill = sqlite.prepare('INSERT INTO a (v) VALUES (?)');
  sqlite.transaction(() => {
    for (let i = 0; i < 200; i++) fill.run('x'.repeat(300));
  })();
  return { path, sqlite };
}

t.test('when one transaction writes one table, then its frames are that table and its index, and their count is the WAL growth', async (t) => {
  const { path, sqlite } = walDb(t);
  const before = walFrameCount(path);
  t.ok(before > 0, `the WAL holds the setup's frames (${before})`);
  sqlite.prepare('INSERT INTO b (v) VALUES (?)').run('one row');
  const after = walFrameCount(path);
  const pages = framePages(path, before, after, sqlite.pragma('page_size', { simple: true }) as number);
  t.equal(pages.length, after - before, 'one page per frame appended');
  const names = framesByOwner(pages, pageOwners(sqlite), 1).map((o) => o.name);
  t.ok(names.includes('b') && names.includes('b_v'), `the row and its index entry (${names.join(', ')})`);
  t.notOk(names.includes('a'), 'not the table it did not touch');
});

t.test('when the WAL starts over, then its checkpoint sequence number changes, and frames count from its beginning again', async (t) => {
  const { path, sqlite } = walDb(t);
  const generation = walGeneration(path);
  sqlite.pragma('wal_checkpoint(RESTART)');
  sqlite.prepare('INSERT INTO b (v) VALUES (?)').run('after the restart');
  t.not(walGeneration(path), generation, 'a new generation');
  const frames = walFrameCount(path);
  t.ok(frames > 0 && frames < 10, `only the new transaction's frames (${frames})`);
});

t.test('frames per operation by owner: pages no B-tree holds are "other"; most first, then by name', async (t) => {
  const owners = new Map([
    [2, 'x'],
    [3, 'y'],
  ]);
  t.same(framesByOwner([2, 2, 3, 9, 2, 3], owners, 2), [
    { name: 'x', frames: 1.5 },
    { name: 'y', frames: 1 },
    { name: 'other', frames: 0.5 },
  ]);
  t.same(framesByOwner([3, 9], owners, 1), [
    { name: 'other', frames: 1 },
    { name: 'y', frames: 1 },
  ]);
});

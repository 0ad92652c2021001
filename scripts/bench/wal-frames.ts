// Which B-trees a commit wrote: the frames it appended to the WAL, each named by the table or
// index its page belongs to. A commit of one create writes every page the create touched, one
// frame each (a 24-byte header and the page, two writes); a commit of 25 creates shares the
// pages they have in common. The bench uses it to say what a create committed alone costs.
import type Database from 'better-sqlite3';
import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';

const WAL_HEADER = 32;
const FRAME_HEADER = 24;

/**
 * Frames now in the WAL: mxFrame of the wal-index header (offset 16 of the -shm file, in the
 * machine's byte order). Read from the file: a checkpoint pragma would checkpoint itself.
 */
export function walFrameCount(dbPath: string): number {
  const fd = openSync(`${dbPath}-shm`, 'r');
  try {
    const b = Buffer.alloc(4);
    readSync(fd, b, 0, 4, 16);
    return endianness() === 'LE' ? b.readUInt32LE(0) : b.readUInt32BE(0);
  } finally {
    closeSync(fd);
  }
}

/** the WAL's checkpoint sequence number (bytes 12-15 of its header): it changes each time the WAL starts over */
export function walGeneration(dbPath: string): number {
  const fd = openSync(`${dbPath}-wal`, 'r');
  try {
    const b = Buffer.alloc(4);
    return readSync(fd, b, 0, 4, 12) === 4 ? b.readUInt32BE(0) : -1;
  } finally {
    closeSync(fd);
  }
}

/** the page number of each frame from `from` (0-based) up to `to`, as the WAL holds them now */
export function framePages(dbPath: string, from: number, to: number, pageSize: number): number[] {
  const fd = openSync(`${dbPath}-wal`, 'r');
  try {
    const b = Buffer.alloc(4);
    const pages: number[] = [];
    for (let f = from; f < to; f++) {
      if (readSync(fd, b, 0, 4, WAL_HEADER + f * (FRAME_HEADER + pageSize)) !== 4) break;
      pages.push(b.readUInt32BE(0)); // WAL headers are big-endian
    }
    return pages;
  } finally {
    closeSync(fd);
  }
}

/** page number -> the table or index it belongs to (SQLite's dbstat; page 1 is `sqlite_schema`) */
export function pageOwners(sqlite: Database.Database): Map<number, string> {
  const rows = sqlite.prepare('SELECT name, pageno FROM dbstat').all() as { name: string; pageno: number }[];
  return new Map(rows.map((r) => [r.pageno, r.name]));
}

/** frames per operation by owner, most first; a page no B-tree holds (freed since) counts as `other` */
export function framesByOwner(pages: readonly number[], owners: ReadonlyMap<number, string>, operations: number): { name: string; frames: number }[] {
  const count = new Map<string, number>();
  for (const p of pages) {
    const name = owners.get(p) ?? 'other';
    count.set(name, (count.get(name) ?? 0) + 1);
  }
  return [...count]
    .map(([name, n]) => ({ name, frames: n / operations }))
    .sort((a, b) => b.frames - a.frames || a.name.localeCompare(b.name));
}

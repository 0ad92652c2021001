// The gate of the SQLite connection: the identity transaction open on it, if any, which every
// other call on the identity, outbox and webhook ports waits for.
//
// An identity transaction (SqliteIdentity.transaction, identity.ts) is BEGIN IMMEDIATE … COMMIT on
// the one connection, around a function that awaits nothing but the port it is handed: its calls
// answer at once, so it runs whole in the turn of the event loop it started in, and the group
// commit (which runs in turns of its own) never meets it. Calls made outside it while it is open
// (another request's, in the same turn) wait for it to end instead of joining it: a rollback must
// not take another caller's write with it.

export class Gate {
  /** the open identity transaction, settled once it has committed or rolled back */
  open: Promise<unknown> | null = null;

  /**
   * Runs `query` (synchronous) now, or once the open identity transaction has ended, whether it
   * committed or not. Its answer or its throw is the promise's.
   */
  pass<T>(query: () => T): Promise<Awaited<T>> {
    const open = this.open;
    if (open) return open.then(query, query) as Promise<Awaited<T>>;
    return new Promise((resolve) => resolve(query() as Awaited<T>));
  }
}

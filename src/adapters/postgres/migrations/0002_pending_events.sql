-- Hand-written: the TTL sweep's index (outbox.ts expireStep), which drizzle's schema cannot
-- declare (a partial index). SQLite's sweep walks events by id from a floor, as there ids commit
-- in order; here they do not (schema.ts, events), so the sweep takes the pending events older
-- than its cutoff directly: only PENDING rows are in this index, so it stays as small as the
-- backlog of undelivered pushes. Its predicate names `state`, so a change of state is never a HOT
-- update (every delivery writes the table's other index entries anew): the price of a sweep that
-- needs no floor. drizzle runs the migrations in a transaction, so this is not CONCURRENTLY: on a
-- large events table it holds off writes while it builds.
CREATE INDEX "events_pending" ON "events" ("event_time") WHERE "state" = 'PENDING';

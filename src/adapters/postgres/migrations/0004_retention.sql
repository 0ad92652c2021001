-- Hand-written (2026-11-26, retention: src/adapters/postgres/retention.ts). Migration 0001 refused
-- every delete of an event or an incident version (append-only, as in SQLite). The retention
-- sweeper now removes old settled events and the versions only they used; these triggers refuse
-- only what must never go: a PENDING event (a push not yet settled) and a version an event still
-- points at. Identity values are never given out twice, so no row is kept for its key (SQLite
-- keeps its newest: migration 0015 there).
DROP TRIGGER IF EXISTS "events_never_deleted" ON "events";
--> statement-breakpoint
DROP TRIGGER IF EXISTS "incident_versions_never_deleted" ON "incident_versions";
--> statement-breakpoint
CREATE TRIGGER "events_kept" BEFORE DELETE ON "events"
	FOR EACH ROW WHEN (OLD."state" = 'PENDING')
	EXECUTE FUNCTION "refuse_delete"('a PENDING event is never deleted: its push is not settled');
--> statement-breakpoint
CREATE FUNCTION "refuse_delete_of_used_version"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM "events" WHERE "incident_id" = OLD."incident_id" AND "version_id" = OLD."id") THEN
		RAISE EXCEPTION 'an incident version an event points at is never deleted' USING ERRCODE = 'restrict_violation';
	END IF;
	RETURN OLD;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "incident_versions_kept" BEFORE DELETE ON "incident_versions"
	FOR EACH ROW EXECUTE FUNCTION "refuse_delete_of_used_version"();

-- Hand-written: the PostgreSQL counterparts of SQLite's triggers (sqlite migrations 0010, 0012),
-- which drizzle cannot declare.
--
-- reach_generation (schema.ts): its one row gets a new token, in the writing transaction, on
-- every write that can change which devices a user reaches by callsign. The token comes from the
-- sequence reach_token, whose values are never given out twice, even by a transaction that rolls
-- back (SQLite draws a random one instead: it has no sequences outside a transaction).
INSERT INTO "reach_generation" ("id", "token") VALUES (1, nextval('reach_token'));
--> statement-breakpoint
CREATE FUNCTION "reach_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE "reach_generation" SET "token" = nextval('reach_token') WHERE "id" = 1;
	RETURN NULL;
END
$$;
--> statement-breakpoint
-- Row triggers, as in SQLite: a statement that changes no row leaves the token. A device update
-- counts only when it changes what a match reads (unique_id too, as in SQLite, although
-- PostgreSQL has no `UPDATE OR REPLACE` that deletes another row); the service's own device
-- writes (status, last_update, settled_up_to, push_seq) leave it.
CREATE TRIGGER "reach_device_inserted" AFTER INSERT ON "devices"
	FOR EACH ROW EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_device_changed" AFTER UPDATE ON "devices"
	FOR EACH ROW
	WHEN (OLD."id" IS DISTINCT FROM NEW."id" OR OLD."name_key" IS DISTINCT FROM NEW."name_key"
		OR OLD."disabled" IS DISTINCT FROM NEW."disabled" OR OLD."unique_id" IS DISTINCT FROM NEW."unique_id")
	EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_device_deleted" AFTER DELETE ON "devices"
	FOR EACH ROW EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_user_deleted" AFTER DELETE ON "users"
	FOR EACH ROW EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_user_device_written" AFTER INSERT OR UPDATE OR DELETE ON "user_devices"
	FOR EACH ROW EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_user_user_written" AFTER INSERT OR UPDATE OR DELETE ON "user_users"
	FOR EACH ROW EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
-- TRUNCATE fires no row trigger (SQLite has no TRUNCATE): one statement trigger per table.
CREATE TRIGGER "reach_truncated" AFTER TRUNCATE ON "devices"
	FOR EACH STATEMENT EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_truncated" AFTER TRUNCATE ON "users"
	FOR EACH STATEMENT EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_truncated" AFTER TRUNCATE ON "user_devices"
	FOR EACH STATEMENT EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
CREATE TRIGGER "reach_truncated" AFTER TRUNCATE ON "user_users"
	FOR EACH STATEMENT EXECUTE FUNCTION "reach_changed"();
--> statement-breakpoint
-- events and incident_versions are append-only (the outbox and what it points at), as in SQLite.
-- There the reason is also that a deleted newest rowid would be given out again; identity values
-- never are, so here the trigger guards the outbox only. TRUNCATE stays possible, for an operator.
CREATE FUNCTION "refuse_delete"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END
$$;
--> statement-breakpoint
CREATE TRIGGER "events_never_deleted" BEFORE DELETE ON "events"
	FOR EACH ROW EXECUTE FUNCTION "refuse_delete"('events are never deleted: the outbox is append-only');
--> statement-breakpoint
CREATE TRIGGER "incident_versions_never_deleted" BEFORE DELETE ON "incident_versions"
	FOR EACH ROW EXECUTE FUNCTION "refuse_delete"('incident versions are never deleted: events point at them');

DROP INDEX "wake_targets_device";--> statement-breakpoint
ALTER TABLE "wake_targets" ADD COLUMN "address" text DEFAULT '' NOT NULL;--> statement-breakpoint
-- written by hand (2026-11-29): each stored target's address, as domain/wake.ts targetAddress
-- gives it; a target whose address is longer than WAKE_ADDRESS_MAX (2 048; no push service or
-- FCM gives one, and PostgreSQL's index would refuse it) removed; then one target per device,
-- kind and address: the oldest's id and createdAt, the newest registration's content (a
-- subscription's renewed keys, `critical`)
UPDATE "wake_targets" SET "address" = coalesce("target"::json -> 'subscription' ->> 'endpoint', "target"::json ->> 'token', "target"::json ->> 'phone', '');--> statement-breakpoint
DELETE FROM "wake_targets" WHERE length("address") > 2048;--> statement-breakpoint
UPDATE "wake_targets" w SET "target" = (SELECT n."target" FROM "wake_targets" n WHERE n."device_id" = w."device_id" AND n."kind" = w."kind" AND n."address" = w."address" ORDER BY n."id" DESC LIMIT 1);--> statement-breakpoint
DELETE FROM "wake_targets" WHERE "id" NOT IN (SELECT min("id") FROM "wake_targets" GROUP BY "device_id", "kind", "address");--> statement-breakpoint
CREATE UNIQUE INDEX "wake_targets_device_address" ON "wake_targets" USING btree ("device_id","kind","address");

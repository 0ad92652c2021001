DROP INDEX "wake_targets_device";--> statement-breakpoint
ALTER TABLE "wake_targets" ADD COLUMN "address" text DEFAULT '' NOT NULL;--> statement-breakpoint
-- written by hand (2026-11-29): each stored target's address, as domain/wake.ts targetAddress
-- gives it, then one target per device, kind and address, the oldest kept
UPDATE "wake_targets" SET "address" = coalesce("target"::json -> 'subscription' ->> 'endpoint', "target"::json ->> 'token', "target"::json ->> 'phone', '');--> statement-breakpoint
DELETE FROM "wake_targets" WHERE "id" NOT IN (SELECT min("id") FROM "wake_targets" GROUP BY "device_id", "kind", "address");--> statement-breakpoint
CREATE UNIQUE INDEX "wake_targets_device_address" ON "wake_targets" USING btree ("device_id","kind","address");

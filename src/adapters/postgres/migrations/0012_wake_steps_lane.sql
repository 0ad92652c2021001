DROP INDEX "wake_steps_due";--> statement-breakpoint
CREATE INDEX "wake_steps_lane" ON "wake_steps" USING btree ("state","owner_id","step","due_at");
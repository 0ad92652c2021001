CREATE TABLE "idempotency_key_counts" (
	"user_id" bigint PRIMARY KEY NOT NULL,
	"keys" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "idempotency_key_counts" ADD CONSTRAINT "idempotency_key_counts_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- the keys stored before the counts (issue 36, 2026-11-29)
INSERT INTO "idempotency_key_counts" ("user_id", "keys") SELECT "user_id", count(*) FROM "idempotency_keys" GROUP BY "user_id";

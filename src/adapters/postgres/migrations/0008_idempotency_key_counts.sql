CREATE TABLE "idempotency_key_counts" (
	"user_id" bigint NOT NULL,
	"stripe" integer NOT NULL,
	"keys" integer NOT NULL,
	CONSTRAINT "idempotency_key_counts_user_id_stripe_pk" PRIMARY KEY("user_id","stripe")
);
--> statement-breakpoint
ALTER TABLE "idempotency_keys" ADD COLUMN "stripe" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "idempotency_key_counts" ADD CONSTRAINT "idempotency_key_counts_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- the keys stored before the counts, in stripe 0 (issue 36, 2026-11-29)
INSERT INTO "idempotency_key_counts" ("user_id", "stripe", "keys") SELECT "user_id", 0, count(*) FROM "idempotency_keys" GROUP BY "user_id";

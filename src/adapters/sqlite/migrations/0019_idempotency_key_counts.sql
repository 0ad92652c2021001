CREATE TABLE `idempotency_key_counts` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`keys` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
-- the keys stored before the counts (issue 36, 2026-11-29)
INSERT INTO `idempotency_key_counts` (`user_id`, `keys`) SELECT `user_id`, count(*) FROM `idempotency_keys` GROUP BY `user_id`;

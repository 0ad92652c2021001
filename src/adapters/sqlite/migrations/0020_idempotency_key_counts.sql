CREATE TABLE `idempotency_key_counts` (
	`user_id` integer NOT NULL,
	`stripe` integer NOT NULL,
	`keys` integer NOT NULL,
	PRIMARY KEY(`user_id`, `stripe`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `idempotency_keys` ADD `stripe` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- the keys stored before the counts, in stripe 0 (issue 36, 2026-11-29)
INSERT INTO `idempotency_key_counts` (`user_id`, `stripe`, `keys`) SELECT `user_id`, 0, count(*) FROM `idempotency_keys` GROUP BY `user_id`;

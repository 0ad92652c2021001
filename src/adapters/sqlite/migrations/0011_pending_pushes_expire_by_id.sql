CREATE TABLE `push_expiry` (
	`id` integer PRIMARY KEY NOT NULL,
	`expired_through` integer NOT NULL
);
--> statement-breakpoint
DROP INDEX `events_pending_time`;
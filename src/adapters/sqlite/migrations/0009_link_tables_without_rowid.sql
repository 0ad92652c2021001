-- Hand-written (drizzle cannot declare WITHOUT ROWID): the two link tables become their
-- primary key, so an insert writes one B-tree instead of a rowid table and an index beside it.
-- Rebuilt as drizzle rebuilds tables: new table, copy, drop, rename (foreign keys are off
-- around migrations, db.ts, and checked after).
CREATE TABLE `__new_incident_callsigns` (
	`callsign_key` text NOT NULL,
	`incident_id` integer NOT NULL,
	PRIMARY KEY(`callsign_key`, `incident_id`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_incident_callsigns`("callsign_key", "incident_id") SELECT "callsign_key", "incident_id" FROM `incident_callsigns`;--> statement-breakpoint
DROP TABLE `incident_callsigns`;--> statement-breakpoint
ALTER TABLE `__new_incident_callsigns` RENAME TO `incident_callsigns`;--> statement-breakpoint
CREATE TABLE `__new_user_incidents` (
	`user_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	PRIMARY KEY(`user_id`, `incident_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`incident_id`) REFERENCES `incidents`(`id`) ON UPDATE no action ON DELETE cascade
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `__new_user_incidents`("user_id", "incident_id") SELECT "user_id", "incident_id" FROM `user_incidents`;--> statement-breakpoint
DROP TABLE `user_incidents`;--> statement-breakpoint
ALTER TABLE `__new_user_incidents` RENAME TO `user_incidents`;--> statement-breakpoint
CREATE INDEX `user_incidents_incident` ON `user_incidents` (`incident_id`);

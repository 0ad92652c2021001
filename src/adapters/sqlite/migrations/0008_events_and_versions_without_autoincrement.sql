PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_events` (
	`id` integer PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`device_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	`event_time` text NOT NULL,
	`attributes` text NOT NULL,
	`version_id` integer NOT NULL,
	`state` text DEFAULT 'PENDING' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_sent_at` text,
	`delivered_at` text
);
--> statement-breakpoint
INSERT INTO `__new_events`("id", "type", "device_id", "incident_id", "event_time", "attributes", "version_id", "state", "attempts", "last_sent_at", "delivered_at") SELECT "id", "type", "device_id", "incident_id", "event_time", "attributes", "version_id", "state", "attempts", "last_sent_at", "delivered_at" FROM `events`;--> statement-breakpoint
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `events_incident` ON `events` (`incident_id`,`device_id`);--> statement-breakpoint
CREATE INDEX `events_device` ON `events` (`device_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_pending_time` ON `events` (`event_time`) WHERE state = 'PENDING';--> statement-breakpoint
CREATE TABLE `__new_incident_versions` (
	`id` integer PRIMARY KEY NOT NULL,
	`incident_id` integer NOT NULL,
	`incident` text NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_incident_versions`("id", "incident_id", "incident") SELECT "id", "incident_id", "incident" FROM `incident_versions`;--> statement-breakpoint
DROP TABLE `incident_versions`;--> statement-breakpoint
ALTER TABLE `__new_incident_versions` RENAME TO `incident_versions`;
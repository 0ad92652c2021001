CREATE TABLE `assignment_responses` (
	`incident_id` integer NOT NULL,
	`device_id` integer NOT NULL,
	`callsign` text NOT NULL,
	`status` text NOT NULL,
	`times` text DEFAULT '{}' NOT NULL,
	PRIMARY KEY(`incident_id`, `device_id`)
);
--> statement-breakpoint
CREATE TABLE `responses` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`device_id` integer NOT NULL,
	`response_id` text NOT NULL,
	`incident_id` integer NOT NULL,
	`status` text NOT NULL,
	`time` text,
	`received_at` text NOT NULL,
	`accepted` integer NOT NULL,
	`reason` text,
	`event_id` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `responses_device_response_id` ON `responses` (`device_id`,`response_id`);
CREATE TABLE `incident_callsigns` (
	`callsign_key` text NOT NULL,
	`incident_id` integer NOT NULL,
	PRIMARY KEY(`callsign_key`, `incident_id`)
);
--> statement-breakpoint
ALTER TABLE `incidents` ADD `resources` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `incidents` ADD `assignments` text DEFAULT '[]' NOT NULL;
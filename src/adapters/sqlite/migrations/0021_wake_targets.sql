CREATE TABLE `wake_steps` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`event_id` integer NOT NULL,
	`device_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	`step` text NOT NULL,
	`due_at` text NOT NULL,
	`state` text DEFAULT 'PENDING' NOT NULL,
	`outcome` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`claimed_until` text,
	`claimed_by` text,
	`created_at` text NOT NULL,
	FOREIGN KEY (`event_id`) REFERENCES `events`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `wake_steps_due` ON `wake_steps` (`state`,`due_at`);--> statement-breakpoint
CREATE INDEX `wake_steps_device_incident` ON `wake_steps` (`device_id`,`incident_id`);--> statement-breakpoint
CREATE INDEX `wake_steps_event` ON `wake_steps` (`event_id`);--> statement-breakpoint
CREATE TABLE `wake_targets` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`device_id` integer NOT NULL,
	`kind` text NOT NULL,
	`target` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`device_id`) REFERENCES `devices`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `wake_targets_device` ON `wake_targets` (`device_id`);
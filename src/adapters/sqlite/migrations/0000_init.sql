CREATE TABLE `assignments` (
	`incident_id` integer NOT NULL,
	`callsign_key` text NOT NULL,
	`callsign` text NOT NULL,
	`device_id` integer NOT NULL,
	PRIMARY KEY(`incident_id`, `callsign_key`, `device_id`),
	FOREIGN KEY (`incident_id`) REFERENCES `incidents`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`device_id`) REFERENCES `devices`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `assignments_device` ON `assignments` (`device_id`);--> statement-breakpoint
CREATE TABLE `devices` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`name_key` text NOT NULL,
	`unique_id` text NOT NULL,
	`status` text DEFAULT 'unknown' NOT NULL,
	`last_update` text,
	`disabled` integer DEFAULT false NOT NULL,
	`attributes` text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `devices_unique_id` ON `devices` (`unique_id`);--> statement-breakpoint
CREATE INDEX `devices_name_key` ON `devices` (`name_key`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`type` text NOT NULL,
	`device_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	`event_time` text NOT NULL,
	`attributes` text NOT NULL,
	`version_id` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_incident` ON `events` (`incident_id`);--> statement-breakpoint
CREATE INDEX `events_device` ON `events` (`device_id`,`id`);--> statement-breakpoint
CREATE TABLE `incident_resources` (
	`incident_id` integer NOT NULL,
	`position` integer NOT NULL,
	`callsign` text NOT NULL,
	`callsign_key` text NOT NULL,
	PRIMARY KEY(`incident_id`, `position`),
	FOREIGN KEY (`incident_id`) REFERENCES `incidents`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `incident_resources_key` ON `incident_resources` (`callsign_key`);--> statement-breakpoint
CREATE TABLE `incident_versions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`incident_id` integer NOT NULL,
	`incident` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `incidents` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`origin_id` text NOT NULL,
	`type` text NOT NULL,
	`time_of_origin` text,
	`time_received` text,
	`time_updated` text,
	`status` text NOT NULL,
	`time_closed` text,
	`latitude` real NOT NULL,
	`longitude` real NOT NULL,
	`priority` integer NOT NULL,
	`description` text,
	`stored_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `incidents_origin_id` ON `incidents` (`origin_id`);--> statement-breakpoint
CREATE INDEX `incidents_stored_at` ON `incidents` (`stored_at`);--> statement-breakpoint
CREATE TABLE `pushes` (
	`id` integer PRIMARY KEY NOT NULL,
	`device_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	`kind` text NOT NULL,
	`state` text DEFAULT 'PENDING' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`last_sent_at` text,
	`delivered_at` text
);
--> statement-breakpoint
CREATE INDEX `pushes_pending_device` ON `pushes` (`device_id`,`id`) WHERE state = 'PENDING';--> statement-breakpoint
CREATE INDEX `pushes_pending_created` ON `pushes` (`created_at`) WHERE state = 'PENDING';--> statement-breakpoint
CREATE INDEX `pushes_pending_device_incident` ON `pushes` (`device_id`,`incident_id`) WHERE state = 'PENDING';--> statement-breakpoint
CREATE TABLE `sessions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`hash` text NOT NULL,
	`user_id` integer NOT NULL,
	`token_id` integer,
	`impersonator_id` integer,
	`created_at` text NOT NULL,
	`last_seen_at` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`token_id`) REFERENCES `tokens`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`impersonator_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `sessions_hash` ON `sessions` (`hash`);--> statement-breakpoint
CREATE INDEX `sessions_user` ON `sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`hash` text NOT NULL,
	`user_id` integer,
	`device_id` integer,
	`created_at` text NOT NULL,
	`expires_at` text,
	`revoked_at` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`device_id`) REFERENCES `devices`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_hash` ON `tokens` (`hash`);--> statement-breakpoint
CREATE INDEX `tokens_user` ON `tokens` (`user_id`);--> statement-breakpoint
CREATE INDEX `tokens_device` ON `tokens` (`device_id`);--> statement-breakpoint
CREATE TABLE `user_devices` (
	`user_id` integer NOT NULL,
	`device_id` integer NOT NULL,
	PRIMARY KEY(`user_id`, `device_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`device_id`) REFERENCES `devices`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `user_devices_device` ON `user_devices` (`device_id`);--> statement-breakpoint
CREATE TABLE `user_incidents` (
	`user_id` integer NOT NULL,
	`incident_id` integer NOT NULL,
	PRIMARY KEY(`user_id`, `incident_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`incident_id`) REFERENCES `incidents`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `user_incidents_incident` ON `user_incidents` (`incident_id`);--> statement-breakpoint
CREATE TABLE `user_users` (
	`user_id` integer NOT NULL,
	`managed_user_id` integer NOT NULL,
	PRIMARY KEY(`user_id`, `managed_user_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`managed_user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `user_users_managed` ON `user_users` (`managed_user_id`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`email` text NOT NULL,
	`email_key` text NOT NULL,
	`phone` text,
	`readonly` integer DEFAULT false NOT NULL,
	`administrator` integer DEFAULT false NOT NULL,
	`map` text,
	`latitude` real DEFAULT 0 NOT NULL,
	`longitude` real DEFAULT 0 NOT NULL,
	`zoom` integer DEFAULT 0 NOT NULL,
	`password_hash` text NOT NULL,
	`coordinate_format` text,
	`disabled` integer DEFAULT false NOT NULL,
	`expiration_time` text,
	`device_limit` integer DEFAULT -1 NOT NULL,
	`user_limit` integer DEFAULT 0 NOT NULL,
	`device_readonly` integer DEFAULT false NOT NULL,
	`limit_commands` integer DEFAULT false NOT NULL,
	`fixed_email` integer DEFAULT false NOT NULL,
	`poi_layer` text,
	`attributes` text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_email_key` ON `users` (`email_key`);
ALTER TABLE `devices` ADD `settled_up_to` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `events` ADD `state` text DEFAULT 'PENDING' NOT NULL;--> statement-breakpoint
ALTER TABLE `events` ADD `attempts` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `events` ADD `last_sent_at` text;--> statement-breakpoint
ALTER TABLE `events` ADD `delivered_at` text;--> statement-breakpoint
CREATE INDEX `events_pending_time` ON `events` (`event_time`) WHERE state = 'PENDING';
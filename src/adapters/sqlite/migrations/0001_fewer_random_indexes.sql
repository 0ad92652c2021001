DROP INDEX `assignments_device`;--> statement-breakpoint
DROP INDEX `pushes_pending_device_incident`;--> statement-breakpoint
DROP INDEX `events_incident`;--> statement-breakpoint
CREATE INDEX `events_incident` ON `events` (`incident_id`,`device_id`);
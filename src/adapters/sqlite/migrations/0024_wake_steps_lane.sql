DROP INDEX `wake_steps_due`;--> statement-breakpoint
CREATE INDEX `wake_steps_lane` ON `wake_steps` (`state`,`owner_id`,`step`,`due_at`);
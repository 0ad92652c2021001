-- Edited: drizzle-kit emits `ALTER TABLE events ADD push_seq integer NOT NULL`, which SQLite
-- refuses (a NOT NULL column needs a default). events is rebuilt instead, with the same columns
-- and push_seq last, as the ALTER would have made it.
--
-- pushId becomes a per-device sequence (events.push_seq, devices.push_seq: the last one given).
-- Devices in the field drop pushes whose pushId they already handled, and acks are cumulative:
-- an existing event keeps its id as its pushId (already increasing per device; the gaps are
-- history), and each device's sequence starts at its last event id (0 if none), or at its floor
-- if that is higher (below), so its next push gets a higher pushId than any it has seen and than
-- its floor. devices.settled_up_to stays valid as it is: it is in the same number space.
DROP INDEX `events_device`;--> statement-breakpoint
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
	`delivered_at` text,
	`push_seq` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_events`("id", "type", "device_id", "incident_id", "event_time", "attributes", "version_id", "state", "attempts", "last_sent_at", "delivered_at", "push_seq") SELECT "id", "type", "device_id", "incident_id", "event_time", "attributes", "version_id", "state", "attempts", "last_sent_at", "delivered_at", "id" FROM `events`;--> statement-breakpoint
-- the rebuild drops the table's triggers (0010's events_never_deleted is recreated below)
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
CREATE INDEX `events_incident` ON `events` (`incident_id`,`device_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `events_device` ON `events` (`device_id`,`push_seq`);--> statement-breakpoint
CREATE TRIGGER `events_never_deleted` BEFORE DELETE ON `events`
BEGIN
	SELECT RAISE(ABORT, 'events are never deleted: a deleted event''s id could be given out again');
END;
--> statement-breakpoint
ALTER TABLE `devices` ADD `push_seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Before this migration a device's floor (settled_up_to) was raised to the last event id of all
-- devices, often above the device's own last: the sequence starts above both, or the device's
-- next pushes would fall at or below its floor, where no read or ack looks.
UPDATE `devices` SET `push_seq` = max(`settled_up_to`, coalesce((SELECT max(`push_seq`) FROM `events` WHERE `device_id` = `devices`.`id`), 0));

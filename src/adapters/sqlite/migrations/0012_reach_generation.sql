CREATE TABLE `reach_generation` (
	`id` integer PRIMARY KEY NOT NULL,
	`token` integer NOT NULL
);
--> statement-breakpoint
-- Hand-written from here. A new random token (within 2^53, so JavaScript reads it exactly) on
-- every write that can change which devices a user reaches by callsign: the incident store
-- keeps match results only while the token it read with them stands (schema.ts). A later
-- migration that rebuilds one of these tables drops its triggers and must recreate them.
INSERT INTO `reach_generation` (`id`, `token`) VALUES (1, abs(random() % 9007199254740991));
--> statement-breakpoint
CREATE TRIGGER `reach_device_inserted` AFTER INSERT ON `devices`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
-- Any update that changes what a match reads, however it names the column (`rowid` too), and
-- any change of unique_id: `UPDATE OR REPLACE` onto another device's unique_id deletes that
-- device without firing its delete trigger. The service's own device writes (status,
-- last_update, settled_up_to) leave the token.
CREATE TRIGGER `reach_device_changed` AFTER UPDATE ON `devices`
	WHEN OLD.`id` IS NOT NEW.`id` OR OLD.`name_key` IS NOT NEW.`name_key` OR OLD.`disabled` IS NOT NEW.`disabled` OR OLD.`unique_id` IS NOT NEW.`unique_id`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_device_deleted` AFTER DELETE ON `devices`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_deleted` AFTER DELETE ON `users`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_device_inserted` AFTER INSERT ON `user_devices`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_device_changed` AFTER UPDATE ON `user_devices`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_device_deleted` AFTER DELETE ON `user_devices`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_user_inserted` AFTER INSERT ON `user_users`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_user_changed` AFTER UPDATE ON `user_users`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `reach_user_user_deleted` AFTER DELETE ON `user_users`
BEGIN
	UPDATE `reach_generation` SET `token` = abs(random() % 9007199254740991) WHERE `id` = 1;
END;

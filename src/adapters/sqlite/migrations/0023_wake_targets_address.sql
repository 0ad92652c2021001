DROP INDEX `wake_targets_device`;--> statement-breakpoint
ALTER TABLE `wake_targets` ADD `address` text DEFAULT '' NOT NULL;--> statement-breakpoint
-- written by hand (2026-11-29): each stored target's address, as domain/wake.ts targetAddress
-- gives it; a target whose address is longer than WAKE_ADDRESS_MAX (2 048; no push service or
-- FCM gives one) removed; then one target per device, kind and address: the oldest's id and
-- createdAt, the newest registration's content (a subscription's renewed keys, `critical`)
UPDATE `wake_targets` SET `address` = coalesce(json_extract(`target`, '$.subscription.endpoint'), json_extract(`target`, '$.token'), json_extract(`target`, '$.phone'), '');--> statement-breakpoint
DELETE FROM `wake_targets` WHERE length(`address`) > 2048;--> statement-breakpoint
UPDATE `wake_targets` SET `target` = (SELECT n.`target` FROM `wake_targets` n WHERE n.`device_id` = `wake_targets`.`device_id` AND n.`kind` = `wake_targets`.`kind` AND n.`address` = `wake_targets`.`address` ORDER BY n.`id` DESC LIMIT 1);--> statement-breakpoint
DELETE FROM `wake_targets` WHERE `id` NOT IN (SELECT min(`id`) FROM `wake_targets` GROUP BY `device_id`, `kind`, `address`);--> statement-breakpoint
CREATE UNIQUE INDEX `wake_targets_device_address` ON `wake_targets` (`device_id`,`kind`,`address`);

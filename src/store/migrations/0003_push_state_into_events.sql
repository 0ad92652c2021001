-- Custom SQL migration file, put your code below! --
-- The outbox rows' delivery state moves onto their events (same id), and each device's
-- highest delivered push becomes its acked_up_to (acks are cumulative: nothing of the device
-- at or below it is still pending). 0004 then drops the pushes table.
UPDATE `events` SET (`state`, `attempts`, `last_sent_at`, `delivered_at`) =
  (SELECT p.`state`, p.`attempts`, p.`last_sent_at`, p.`delivered_at` FROM `pushes` p WHERE p.`id` = `events`.`id`)
  WHERE EXISTS (SELECT 1 FROM `pushes` p WHERE p.`id` = `events`.`id`);--> statement-breakpoint
UPDATE `devices` SET `acked_up_to` =
  COALESCE((SELECT max(p.`id`) FROM `pushes` p WHERE p.`device_id` = `devices`.`id` AND p.`state` = 'DELIVERED'), 0);

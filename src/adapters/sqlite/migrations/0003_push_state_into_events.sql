-- Custom SQL migration file, put your code below! --
-- The outbox rows' delivery state moves onto their events (same id). An event without an
-- outbox row (none was ever written without one) was never going to be sent: EXPIRED, not
-- PENDING. Each device's highest delivered push becomes its settled_up_to: acks were
-- cumulative, so nothing of the device at or below it is still pending. 0004 then drops
-- the pushes table.
UPDATE `events` SET (`state`, `attempts`, `last_sent_at`, `delivered_at`) =
  (SELECT p.`state`, p.`attempts`, p.`last_sent_at`, p.`delivered_at` FROM `pushes` p WHERE p.`id` = `events`.`id`)
  WHERE EXISTS (SELECT 1 FROM `pushes` p WHERE p.`id` = `events`.`id`);--> statement-breakpoint
UPDATE `events` SET `state` = 'EXPIRED' WHERE NOT EXISTS (SELECT 1 FROM `pushes` p WHERE p.`id` = `events`.`id`);--> statement-breakpoint
UPDATE `devices` SET `settled_up_to` =
  COALESCE((SELECT max(p.`id`) FROM `pushes` p WHERE p.`device_id` = `devices`.`id` AND p.`state` = 'DELIVERED'), 0);

-- Custom migration (hand-written): the TTL sweep's one row. It starts just below the first
-- pending event (found through events_pending_time, which 0010 drops), or after the last event
-- if none is pending; on a new database, at 0.
INSERT INTO `outbox_sweep` (`id`, `expired_up_to`) VALUES (
  1,
  coalesce((SELECT min(`id`) FROM `events` WHERE `state` = 'PENDING') - 1, (SELECT coalesce(max(`id`), 0) FROM `events`))
);

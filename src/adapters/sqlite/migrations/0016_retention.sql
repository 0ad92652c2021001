-- Hand-written (2026-11-26, retention: src/adapters/sqlite/retention.ts). Migration 0010 refused
-- every delete of an event or an incident version: their rowid keys (no AUTOINCREMENT, 0008) take
-- the largest key + 1, so a deleted newest row's id would be given out again, and an event id
-- must name one event for good (the TTL sweep's floor push_expiry.expired_through, the group
-- commit's horizon, the hub's sent event ids). The retention sweeper now removes old settled
-- events and the versions only they used; these triggers refuse only what must never go: the
-- row with the largest key (its id would come again), a PENDING event (a push not yet settled),
-- and a version an event still points at. pushIds are not event ids (0014: devices.push_seq),
-- so removing events never gives a pushId out again.
DROP TRIGGER IF EXISTS `events_never_deleted`;
--> statement-breakpoint
DROP TRIGGER IF EXISTS `incident_versions_never_deleted`;
--> statement-breakpoint
CREATE TRIGGER `events_kept` BEFORE DELETE ON `events`
WHEN OLD.state = 'PENDING' OR OLD.id >= (SELECT max(id) FROM `events`)
BEGIN
	SELECT RAISE(ABORT, 'a PENDING event, or the newest (whose id would be given out again), is never deleted');
END;
--> statement-breakpoint
CREATE TRIGGER `incident_versions_kept` BEFORE DELETE ON `incident_versions`
WHEN OLD.id >= (SELECT max(id) FROM `incident_versions`)
	OR EXISTS (SELECT 1 FROM `events` WHERE incident_id = OLD.incident_id AND version_id = OLD.id)
BEGIN
	SELECT RAISE(ABORT, 'an incident version an event points at, or the newest (whose id would be given out again), is never deleted');
END;

-- Hand-written. events and incident_versions have no AUTOINCREMENT (0008): their ids only grow
-- because no row is ever deleted. Were the newest event deleted, its id would be given out
-- again, below devices' settled_up_to floors, and that push would never be sent. So deleting
-- is refused. (A table rebuild by a later migration drops these triggers: it must recreate them.)
CREATE TRIGGER `events_never_deleted` BEFORE DELETE ON `events`
BEGIN
	SELECT RAISE(ABORT, 'events are never deleted: a deleted event''s id could be given out again');
END;
--> statement-breakpoint
CREATE TRIGGER `incident_versions_never_deleted` BEFORE DELETE ON `incident_versions`
BEGIN
	SELECT RAISE(ABORT, 'incident versions are never deleted: a deleted version''s id could be given out again');
END;

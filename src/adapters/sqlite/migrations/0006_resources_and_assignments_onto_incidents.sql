-- Custom migration (hand-written): an incident's resources and assignments move from their
-- own tables onto the incident row, in the order they were read before (resources by
-- position, assignments by rowid, which is the order they were assigned in). The callsign
-- filter gets one row per distinct callsign key. 0007 drops the old tables.
UPDATE `incidents` SET `resources` = (
  SELECT json_group_array(`callsign` ORDER BY `position`) FROM `incident_resources` r WHERE r.`incident_id` = `incidents`.`id`
) WHERE `id` IN (SELECT `incident_id` FROM `incident_resources`);
--> statement-breakpoint
UPDATE `incidents` SET `assignments` = (
  SELECT json_group_array(json_object('callsignKey', a.`callsign_key`, 'callsign', a.`callsign`, 'deviceId', a.`device_id`) ORDER BY a.`rowid`)
  FROM `assignments` a WHERE a.`incident_id` = `incidents`.`id`
) WHERE `id` IN (SELECT `incident_id` FROM `assignments`);
--> statement-breakpoint
INSERT OR IGNORE INTO `incident_callsigns` (`callsign_key`, `incident_id`) SELECT DISTINCT `callsign_key`, `incident_id` FROM `incident_resources`;

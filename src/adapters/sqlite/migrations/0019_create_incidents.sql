ALTER TABLE `users` ADD `create_incidents` integer DEFAULT false NOT NULL;--> statement-breakpoint
-- Hand-written (issue 36, 2026-11-29): creating incidents became a right an administrator grants.
-- Users who created incidents keep it: a creator is linked to what it created (user_incidents),
-- and no other record says who created an incident. A user linked to an incident by
-- POST /permissions gets it too (a link cannot tell how it was made); the creator of an incident
-- since deleted does not (its link went with it): an administrator grants it again.
UPDATE `users` SET `create_incidents` = 1 WHERE `id` IN (SELECT `user_id` FROM `user_incidents`);

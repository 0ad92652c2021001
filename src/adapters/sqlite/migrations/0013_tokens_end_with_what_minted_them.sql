-- Edited: drizzle-kit leaves out `ON DELETE cascade` when it adds a column with a foreign key
-- (its snapshot has it). Without it, deleting a user whose token is the parent of another
-- user's token (minted in a session opened as that user) would fail on the foreign key.
ALTER TABLE `tokens` ADD `parent_id` integer REFERENCES tokens(id) ON DELETE cascade;--> statement-breakpoint
ALTER TABLE `tokens` ADD `impersonator_id` integer REFERENCES users(id) ON DELETE cascade;--> statement-breakpoint
CREATE INDEX `tokens_parent` ON `tokens` (`parent_id`);

CREATE TABLE `outbox_sweep` (
	`id` integer PRIMARY KEY NOT NULL,
	`expired_up_to` integer NOT NULL
);

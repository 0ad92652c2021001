DROP TABLE `assignments`;--> statement-breakpoint
DROP TABLE `incident_resources`;
// Drizzle table definitions: the one description of the database. Migrations under
// src/store/migrations are generated from this file by `npm run db:generate`.
import { sqliteTable, integer, text, real, primaryKey, index, uniqueIndex, type AnySQLiteColumn } from 'drizzle-orm/sqlite-core';

const bool = (name: string) => integer(name, { mode: 'boolean' }).notNull().default(false);

export const users = sqliteTable(
  'users',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    name: text('name').notNull(),
    email: text('email').notNull(),
    /** lower-cased email: logins are case-insensitive, uniqueness too */
    emailKey: text('email_key').notNull(),
    phone: text('phone'),
    readonly: bool('readonly'),
    administrator: bool('administrator'),
    map: text('map'),
    latitude: real('latitude').notNull().default(0),
    longitude: real('longitude').notNull().default(0),
    zoom: integer('zoom').notNull().default(0),
    passwordHash: text('password_hash').notNull(),
    coordinateFormat: text('coordinate_format'),
    disabled: bool('disabled'),
    expirationTime: text('expiration_time'),
    deviceLimit: integer('device_limit').notNull().default(-1),
    userLimit: integer('user_limit').notNull().default(0),
    deviceReadonly: bool('device_readonly'),
    limitCommands: bool('limit_commands'),
    fixedEmail: bool('fixed_email'),
    poiLayer: text('poi_layer'),
    attributes: text('attributes').notNull().default('{}'),
    /**
     * may create incidents (and move one to another originId): originIds are unique across the
     * service, so whoever creates can block another tenant's; only an administrator grants it
     * (issue 36, 2026-11-29). Administrators create whatever it says.
     */
    createIncidents: bool('create_incidents'),
  },
  (t) => [uniqueIndex('users_email_key').on(t.emailKey)],
);

export const devices = sqliteTable(
  'devices',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    name: text('name').notNull(),
    /** callsignKey(name): callsign matching is an equality lookup on this column */
    nameKey: text('name_key').notNull(),
    uniqueId: text('unique_id').notNull(),
    status: text('status', { enum: ['online', 'offline', 'unknown'] }).notNull().default('unknown'),
    lastUpdate: text('last_update'),
    disabled: bool('disabled'),
    attributes: text('attributes').notNull().default('{}'),
    /**
     * No push (event) of this device at or below this pushId is pending: delivery reads the
     * device's events from here on, not from its first. Cumulative acks raise it, and so does
     * a delivery read that finds nothing pending below a point (outbox.ts).
     */
    settledUpTo: integer('settled_up_to').notNull().default(0),
    /**
     * The last pushId given to this device: the unit of work that writes its events bumps it
     * once per event in the same transaction, so its pushIds are gapless and in commit order
     * (src/store/incidents.ts). Migration 0014 started it at the device's last event id.
     */
    pushSeq: integer('push_seq').notNull().default(0),
  },
  (t) => [uniqueIndex('devices_unique_id').on(t.uniqueId), index('devices_name_key').on(t.nameKey)],
);

export const userDevices = sqliteTable(
  'user_devices',
  {
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    deviceId: integer('device_id').notNull().references(() => devices.id, { onDelete: 'cascade' }),
  },
  (t) => [primaryKey({ columns: [t.userId, t.deviceId] }), index('user_devices_device').on(t.deviceId)],
);

export const userUsers = sqliteTable(
  'user_users',
  {
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    managedUserId: integer('managed_user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  },
  (t) => [primaryKey({ columns: [t.userId, t.managedUserId] }), index('user_users_managed').on(t.managedUserId)],
);

export const incidents = sqliteTable(
  'incidents',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    originId: text('origin_id').notNull(),
    type: text('type').notNull(),
    timeOfOrigin: text('time_of_origin'),
    timeReceived: text('time_received'),
    timeUpdated: text('time_updated'),
    status: text('status', { enum: ['OPEN', 'CLOSED'] }).notNull(),
    timeClosed: text('time_closed'),
    latitude: real('latitude').notNull(),
    longitude: real('longitude').notNull(),
    priority: integer('priority').notNull(),
    description: text('description'),
    /** server time of the last write; `updatedSince` filters on it */
    storedAt: text('stored_at').notNull(),
    /** the callsigns as sent (JSON array of strings, in order) */
    resources: text('resources').notNull().default('[]'),
    /**
     * the devices assigned, per callsign (JSON array of {callsignKey, callsign, deviceId}, in
     * the order they were assigned). Only an OPEN incident has any. On the incident row, not
     * in tables of their own, which cost a create five B-trees to write (now two, for
     * the callsign filter; BENCHMARKS.md as of 966ad38). A deleted device may still be listed:
     * readers drop ids that no longer exist.
     */
    assignments: text('assignments').notNull().default('[]'),
    /** raised by every write (1 when created): with the id, the incident's ETag (DESIGN section 12) */
    version: integer('version').notNull().default(1),
  },
  (t) => [uniqueIndex('incidents_origin_id').on(t.originId), index('incidents_stored_at').on(t.storedAt)],
);

/**
 * The Idempotency-Keys of incident writes, per user (DESIGN section 12): written in the unit of
 * work of the write they answer, with that answer (ports/incidents.ts StoredAnswer, JSON) and
 * the request's fingerprint. Kept IDEMPOTENCY_TTL_H hours after created_at, then swept in
 * batches, oldest first (created_at's index); one past its retention is taken as new before
 * the sweep reaches it.
 */
export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    createdAt: text('created_at').notNull(),
    answer: text('answer').notNull(),
    /** the idempotency_key_counts stripe the key is counted in (SQLite: always 0) */
    stripe: integer('stripe').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.key] }), index('idempotency_keys_created_at').on(t.createdAt)],
);

/**
 * How many rows of idempotency_keys each user holds (issue 36), in stripes (domain/idempotency.ts
 * keyStripeCaps): raised in the unit of work that stores a new key, lowered by the sweep that
 * removes keys, so the bound IDEMPOTENCY_KEYS_MAX is checked without counting the user's keys.
 * SQLite writes one at a time and uses stripe 0 alone; PostgreSQL spreads a user's concurrent
 * writes over 16, so they do not queue for one row lock.
 */
export const idempotencyKeyCounts = sqliteTable(
  'idempotency_key_counts',
  {
    userId: integer('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    stripe: integer('stripe').notNull(),
    keys: integer('keys').notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.stripe] })],
);

/**
 * The callsign filter of the incident list: one row per distinct callsign key an incident
 * lists (none once it is closed). Keyed by callsign only, so no foreign key: a cascade would
 * scan it; the incident store deletes an incident's rows by the keys on its row.
 *
 * WITHOUT ROWID, like user_incidents (migration 0009, hand-written: drizzle cannot say it): the
 * primary key is the table, not an index beside a rowid table, so a create writes one B-tree
 * fewer for each. A migration drizzle generates that rebuilds either table must keep it.
 */
export const incidentCallsigns = sqliteTable(
  'incident_callsigns',
  {
    callsignKey: text('callsign_key').notNull(),
    incidentId: integer('incident_id').notNull(),
  },
  (t) => [primaryKey({ columns: [t.callsignKey, t.incidentId] })],
);

export const userIncidents = sqliteTable(
  'user_incidents',
  {
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    incidentId: integer('incident_id').notNull().references(() => incidents.id, { onDelete: 'cascade' }),
  },
  (t) => [primaryKey({ columns: [t.userId, t.incidentId] }), index('user_incidents_incident').on(t.incidentId)],
);

/**
 * The incident as it was after an operation, once per operation: events point at it. Removed by
 * retention (retention.ts) once no event points at it, but never the newest (a trigger refuses
 * it, migration 0016), so a plain rowid key never gives an id out twice, without AUTOINCREMENT's
 * sqlite_sequence row to read and write on every insert (0008).
 */
export const incidentVersions = sqliteTable('incident_versions', {
  id: integer('id').primaryKey(),
  incidentId: integer('incident_id').notNull(),
  incident: text('incident').notNull(),
});

/**
 * The transactional outbox: each event is one push to its device, written in the same
 * transaction as the incident change; push_seq is the pushId devices see. Only the delivery
 * columns (state, attempts, sent/delivered times) change afterwards; retention (retention.ts)
 * removes it once settled and older than RETENTION_DAYS, never while PENDING (migration 0016's
 * trigger). No foreign keys: events outlive deleted incidents and devices.
 */
export const events = sqliteTable(
  'events',
  {
    /** the newest row is never deleted (a trigger refuses it, migration 0016), so ids only grow without AUTOINCREMENT (0008) */
    id: integer('id').primaryKey(),
    type: text('type', { enum: ['incidentAssigned', 'incidentDeassigned', 'incidentResponse'] }).notNull(),
    deviceId: integer('device_id').notNull(),
    incidentId: integer('incident_id').notNull(),
    eventTime: text('event_time').notNull(),
    attributes: text('attributes').notNull(),
    /** the incident as it was when the event was written */
    versionId: integer('version_id').notNull(),
    state: text('state', { enum: ['PENDING', 'DELIVERED', 'EXPIRED', 'SUPERSEDED'] }).notNull().default('PENDING'),
    attempts: integer('attempts').notNull().default(0),
    lastSentAt: text('last_sent_at'),
    deliveredAt: text('delivered_at'),
    /**
     * The pushId devices see: the device's own sequence (devices.push_seq as this event bumped
     * it), gapless and in commit order for that device. Events written before migration 0014
     * kept their id as their pushId (gaps there are history).
     */
    pushSeq: integer('push_seq').notNull(),
  },
  // Per event, one index keyed by device (a random page write): events_device serves both the
  // event list (one device's events in push_seq order are in id order) and delivery, which
  // starts at the device's settled_up_to; unique, as a pushId names one push. events_incident also
  // carries device_id: the supersede rule looks up one device's events of one incident.
  // The TTL sweep has no index (0011 dropped events_pending_time, one B-tree write per event
  // and ~1.8 of the ~16 pages a create committed alone wrote): events are written in time
  // order, so it walks them by id from push_expiry's floor (outbox.ts).
  (t) => [index('events_incident').on(t.incidentId, t.deviceId), uniqueIndex('events_device').on(t.deviceId, t.pushSeq)],
);

/**
 * The response status of each assignment (incident, device) that has one (DESIGN section 10):
 * a row appears when the device first answers, or when a stand-down cancels the assignment;
 * none means NONE. The response unit of work (responses.ts) and the incident's (incidents.ts,
 * stand-downs: CANCELLED; a new assignment: the row removed) write it, each inside the
 * transaction that decides on it. `callsign`: the one the device is (or was) assigned under;
 * `times`: JSON {status: ISO time} of every status reached. No foreign keys: like events, it
 * outlives a deleted incident (whose answers stay `cancelled`).
 */
export const assignmentResponses = sqliteTable(
  'assignment_responses',
  {
    incidentId: integer('incident_id').notNull(),
    deviceId: integer('device_id').notNull(),
    callsign: text('callsign').notNull(),
    status: text('status', { enum: ['ACKNOWLEDGED', 'RESPONDING', 'NOT_AVAILABLE', 'ON_SCENE', 'CLEARED', 'CANCELLED'] }).notNull(),
    times: text('times').notNull().default('{}'),
  },
  (t) => [primaryKey({ columns: [t.incidentId, t.deviceId] })],
);

/**
 * Every answer a device sent, once per (device, responseId): what it asked and the result it
 * got, which a repeat of the responseId is answered with. `event_id`: the incidentResponse event
 * it wrote, when it moved the status. AUTOINCREMENT: the event's push_seq is the negated id of
 * its response (responses.ts), so an id must never be given out twice. No foreign keys.
 */
export const responses = sqliteTable(
  'responses',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    deviceId: integer('device_id').notNull(),
    responseId: text('response_id').notNull(),
    incidentId: integer('incident_id').notNull(),
    status: text('status').notNull(),
    /** the device's time, as sent */
    time: text('time'),
    receivedAt: text('received_at').notNull(),
    accepted: integer('accepted', { mode: 'boolean' }).notNull(),
    reason: text('reason', { enum: ['not-assigned', 'cancelled'] }),
    eventId: integer('event_id'),
  },
  (t) => [uniqueIndex('responses_device_response_id').on(t.deviceId, t.responseId)],
);

/**
 * The TTL sweep's floor (outbox.ts), one row: no event at or below `expired_through` is still
 * PENDING with an event_time before the last cutoff swept. It only rises.
 */
export const pushExpiry = sqliteTable('push_expiry', {
  id: integer('id').primaryKey(),
  expiredThrough: integer('expired_through').notNull(),
});

/**
 * Which devices a user reaches by callsign changes only with devices (their id, name_key and
 * disabled; unique_id too, since `UPDATE OR REPLACE` onto another's deletes that one without a
 * delete trigger), user_devices and user_users. Triggers (migration 0012, hand-written) set
 * `token` to a new random value on any such write, and a deleted user (whose links cascade), so the
 * incident store may keep what a match query returned until the token it read with it changes.
 * Random, not a counter: a counter bumped in a transaction that rolls back would be bumped to
 * the same value again by the next change, and a result cached meanwhile would look current.
 * One row.
 */
export const reachGeneration = sqliteTable('reach_generation', {
  id: integer('id').primaryKey(),
  token: integer('token').notNull(),
});

/** Bearer tokens for users and devices; only the SHA-256 of the token is kept. */
export const tokens = sqliteTable(
  'tokens',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    hash: text('hash').notNull(),
    userId: integer('user_id').references(() => users.id, { onDelete: 'cascade' }),
    deviceId: integer('device_id').references(() => devices.id, { onDelete: 'cascade' }),
    /**
     * the token the minting request was authenticated with (as a bearer token, or through a
     * session opened with it): revoking that one revokes this one, and it never expires later
     */
    parentId: integer('parent_id').references((): AnySQLiteColumn => tokens.id, { onDelete: 'cascade' }),
    /** minted in a session opened as this user by another: it ends as that session would */
    impersonatorId: integer('impersonator_id').references(() => users.id, { onDelete: 'cascade' }),
    createdAt: text('created_at').notNull(),
    expiresAt: text('expires_at'),
    revokedAt: text('revoked_at'),
  },
  (t) => [
    uniqueIndex('tokens_hash').on(t.hash),
    index('tokens_user').on(t.userId),
    index('tokens_device').on(t.deviceId),
    index('tokens_parent').on(t.parentId),
  ],
);

/** Server-side sessions. `hash` is the SHA-256 of the JSESSIONID cookie value. */
export const sessions = sqliteTable(
  'sessions',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    hash: text('hash').notNull(),
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    /** set when opened with a token: the session cannot outlive it */
    tokenId: integer('token_id').references(() => tokens.id, { onDelete: 'cascade' }),
    impersonatorId: integer('impersonator_id').references(() => users.id, { onDelete: 'cascade' }),
    createdAt: text('created_at').notNull(),
    lastSeenAt: text('last_seen_at').notNull(),
  },
  (t) => [uniqueIndex('sessions_hash').on(t.hash), index('sessions_user').on(t.userId)],
);


/**
 * Webhooks to the CAD (DESIGN section 11), owned by a user. `secret` is the Standard Webhooks
 * signing key (`whsec_…`) in clear: the sender must sign with it, so a hash would not do. It is
 * returned once (creation, rotation) and never logged; the database file and its backups hold
 * it, so they are protected like the tokens' hashes and more (file permissions, encrypted
 * backups). `previous_secret` signs too until `previous_secret_until` (rotation).
 */
export const webhooks = sqliteTable(
  'webhooks',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    /** JSON array of event types */
    events: text('events').notNull(),
    enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
    disabledReason: text('disabled_reason'),
    secret: text('secret').notNull(),
    previousSecret: text('previous_secret'),
    previousSecretUntil: text('previous_secret_until'),
    createdAt: text('created_at').notNull(),
  },
  (t) => [index('webhooks_user').on(t.userId)],
);

/**
 * The webhook outbox: one row per (webhook, event), written in the transaction of the event's
 * cause. The sender claims a due row by setting claimed_until (a lease) and claimed_by; a row
 * whose lease ran out is claimed again (the node that held it stopped). payload is the exact
 * body every attempt sends.
 */
export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    webhookId: integer('webhook_id').notNull().references(() => webhooks.id, { onDelete: 'cascade' }),
    /** the webhook-id header */
    msgId: text('msg_id').notNull(),
    type: text('type').notNull(),
    incidentId: integer('incident_id').notNull(),
    payload: text('payload').notNull(),
    state: text('state', { enum: ['PENDING', 'DELIVERED', 'FAILED'] }).notNull().default('PENDING'),
    attempts: integer('attempts').notNull().default(0),
    createdAt: text('created_at').notNull(),
    nextAttemptAt: text('next_attempt_at'),
    claimedUntil: text('claimed_until'),
    claimedBy: text('claimed_by'),
  },
  (t) => [
    // the sender: a webhook's due deliveries; the earlier ones of an incident; those claimed
    index('webhook_deliveries_pending').on(t.webhookId, t.state, t.nextAttemptAt),
    index('webhook_deliveries_incident').on(t.webhookId, t.incidentId, t.id),
    index('webhook_deliveries_claimed').on(t.claimedUntil),
  ],
);

/** every attempt of a delivery: when, the answer's status (null: none) or the error */
export const webhookAttempts = sqliteTable(
  'webhook_attempts',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    deliveryId: integer('delivery_id').notNull().references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
    at: text('at').notNull(),
    status: integer('status'),
    error: text('error'),
    durationMs: integer('duration_ms').notNull(),
  },
  (t) => [index('webhook_attempts_delivery').on(t.deliveryId)],
);

/**
 * Where a device is woken when a push goes unacknowledged (DESIGN section 14): at most
 * WAKE_TARGETS_MAX (domain/wake.ts) per device, counted in the transaction that inserts. `target`
 * is the registered target as JSON ({kind, subscription | token[, critical] | phone}): the
 * device's own addresses, served back to it, never a provider secret. Gone with their device.
 */
export const wakeTargets = sqliteTable(
  'wake_targets',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    deviceId: integer('device_id').notNull().references(() => devices.id, { onDelete: 'cascade' }),
    kind: text('kind', { enum: ['webpush', 'fcm', 'apns', 'sms', 'voice'] }).notNull(),
    target: text('target').notNull(),
    createdAt: text('created_at').notNull(),
    /**
     * where the target is reached (domain/wake.ts targetAddress: the endpoint, the token, the
     * phone): a device holds one target per kind and address, registered again, it is updated
     * (added 2026-11-29, migration 0023: earlier duplicates were removed, the oldest kept)
     */
    address: text('address').notNull().default(''),
  },
  (t) => [uniqueIndex('wake_targets_device_address').on(t.deviceId, t.kind, t.address)],
);

/**
 * The wake ladder's steps (DESIGN section 14), one row per (incidentAssigned push, step), to be
 * written in the incident's unit of work and claimed with a lease (claimed_until, claimed_by) as
 * webhook deliveries are. Removed
 * with their push (retention deletes settled events: the cascade, through wake_steps_event).
 */
export const wakeSteps = sqliteTable(
  'wake_steps',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    eventId: integer('event_id').notNull().references(() => events.id, { onDelete: 'cascade' }),
    deviceId: integer('device_id').notNull(),
    incidentId: integer('incident_id').notNull(),
    step: text('step', { enum: ['wake', 'sms', 'voice'] }).notNull(),
    dueAt: text('due_at').notNull(),
    state: text('state', { enum: ['PENDING', 'DONE', 'STOPPED'] }).notNull().default('PENDING'),
    outcome: text('outcome'),
    attempts: integer('attempts').notNull().default(0),
    claimedUntil: text('claimed_until'),
    claimedBy: text('claimed_by'),
    createdAt: text('created_at').notNull(),
    /**
     * (added last, as migration 0022 appends it) the user whose incident write planned the step: the wake sender's fair share is per owner
     * (domain/webhook-share.ts shareByOwner; 0 for steps written before 2026-11-29)
     */
    ownerId: integer('owner_id').notNull().default(0),
    /**
     * (added last, as migration 0025 appends it) when a target of the step was last accepted by
     * its provider: an SMS reply answers the SMS last delivered to its number (sms-replies.ts),
     * which retries and shares can send out of due order
     */
    acceptedAt: text('accepted_at'),
  },
  (t) => [
    // the sender: its lanes (owner and kind), each one's due steps in order (wake-steps.ts); the
    // responders list and the stop rules: a device's steps of an incident
    index('wake_steps_lane').on(t.state, t.ownerId, t.step, t.dueAt),
    index('wake_steps_device_incident').on(t.deviceId, t.incidentId),
    index('wake_steps_event').on(t.eventId),
  ],
);

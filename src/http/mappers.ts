// Records -> API shapes. Whitelists: a column added to a table never leaks by accident, and
// the password hash has no path out.
import type { DeviceRecord, UserRecord } from '../ports/identity.js';
import type { DeliveryRecord, WebhookRecord } from '../ports/webhooks.js';
import type { Schemas } from './types.js';

function json(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function publicUser(u: UserRecord): Schemas['User'] {
  return {
    id: u.id,
    name: u.name,
    email: u.email,
    phone: u.phone,
    readonly: u.readonly,
    administrator: u.administrator,
    map: u.map,
    latitude: u.latitude,
    longitude: u.longitude,
    zoom: u.zoom,
    coordinateFormat: u.coordinateFormat,
    disabled: u.disabled,
    expirationTime: u.expirationTime,
    deviceLimit: u.deviceLimit,
    userLimit: u.userLimit,
    deviceReadonly: u.deviceReadonly,
    limitCommands: u.limitCommands,
    fixedEmail: u.fixedEmail,
    poiLayer: u.poiLayer,
    createIncidents: u.createIncidents,
    attributes: json(u.attributes),
  };
}

/**
 * `online` is a socket open and answering right now (`online`: the device hub's set, read from
 * memory); the stored status, written in batches, only says whether the device was ever
 * connected (`unknown` before its first socket, `offline` after).
 */
export function publicDevice(d: DeviceRecord, online: ReadonlySet<number>): Schemas['Device'] {
  return {
    id: d.id,
    name: d.name,
    uniqueId: d.uniqueId,
    status: online.has(d.id) ? 'online' : d.status === 'unknown' ? 'unknown' : 'offline',
    lastUpdate: d.lastUpdate,
    disabled: d.disabled,
    attributes: json(d.attributes),
  };
}

/** a webhook as the API shows it: never a secret */
export function publicWebhook(w: WebhookRecord): Schemas['Webhook'] {
  return { id: w.id, userId: w.userId, url: w.url, events: w.events, enabled: w.enabled, disabledReason: w.disabledReason, createdAt: w.createdAt };
}

export function publicDelivery(d: DeliveryRecord): Schemas['WebhookDelivery'] {
  return {
    id: d.id,
    webhookId: d.webhookId,
    webhookMessageId: d.msgId,
    type: d.type,
    incidentId: d.incidentId,
    state: d.state,
    createdAt: d.createdAt,
    nextAttemptAt: d.state === 'PENDING' ? d.nextAttemptAt : null,
    attempts: d.attempts.map((a) => ({ at: a.at, status: a.status, error: a.error, durationMs: a.durationMs })),
  };
}

// The bodies the CAD's webhooks receive (DESIGN sections 1 and 11), built here once: openapi.yaml
// declares one `webhooks` entry per event type, openapi-typescript types it in generated/, and
// each constructor below takes what its event needs and returns exactly that type. The adapters
// call them in the unit of work that causes the event and store the body as it is; they decide no
// field of it.
//
// Types only come from generated/ (a type-only import: .dependency-cruiser.cjs lets the domain
// take declarations from there and nothing else). The chain that makes a new event type fail to
// compile until it is built: an event type added to `WebhookEventType`'s enum with no `webhooks`
// entry fails at `WebhookPayload` (`webhooks[K]`); with one, `WebhookFacts` and
// `WEBHOOK_PAYLOADS` must each name it. That it is also sent is a test's to show
// (test/api/webhooks.test.ts: every event type of the spec reaches a receiver).
import type { components, webhooks } from '../../generated/api.js';

type Schemas = components['schemas'];

/** an event a webhook may subscribe to: the spec's `WebhookEventType` */
export type WebhookEventType = Schemas['WebhookEventType'];

/** the body (Standard Webhooks envelope) the spec's `webhooks` entry for K declares */
export type WebhookPayload<K extends WebhookEventType = WebhookEventType> = K extends WebhookEventType
  ? webhooks[K]['post']['requestBody']['content']['application/json']
  : never;

/** what each event's constructor needs: one entry per event type */
export interface WebhookFacts {
  'incident.delivery': DeliveryFacts;
  'incident.response': ResponseFacts;
  'incident.closed': ClosedFacts;
}

/** a push settled (acknowledged or expired), as its event row and incident version hold it */
export interface DeliveryFacts {
  incidentId: number;
  /** the incident's originId as of the push (null when its version was not found) */
  originId: string | null;
  deviceId: number;
  eventId: number;
  eventType: Schemas['WebhookIncidentDelivery']['eventType'];
  /** the pushed event's attributes */
  attributes: { readonly callsign?: string | undefined };
  state: Schemas['WebhookIncidentDelivery']['state'];
  /** when it was settled */
  at: string;
}

/** an answer that moved its assignment forward, and the incidentResponse event written for it */
export interface ResponseFacts {
  incident: { readonly id: number; readonly originId: string };
  event: { readonly id: number; readonly deviceId: number; readonly eventTime: string };
  callsign: string;
  status: Schemas['ResponseStatus'];
  responseId: string;
  /** when the status was reached, as recorded (domain/response.ts) */
  time: string;
}

/** an incident closed (OPEN → CLOSED), or deleted while open */
export interface ClosedFacts {
  incident: { readonly id: number; readonly originId: string; readonly timeClosed: string | null };
  deleted: boolean;
  /** when it was closed or deleted */
  at: string;
}

/** incident.delivery: a push reached its device (DELIVERED) or expired undelivered (EXPIRED) */
export function incidentDeliveryPayload(f: DeliveryFacts): WebhookPayload<'incident.delivery'> {
  return {
    type: 'incident.delivery',
    timestamp: f.at,
    data: {
      incidentId: f.incidentId,
      originId: f.originId ?? '',
      deviceId: f.deviceId,
      callsign: f.attributes.callsign ?? null,
      eventId: f.eventId,
      eventType: f.eventType,
      state: f.state,
    },
  };
}

/** incident.response: stamped with the incidentResponse event's time */
export function incidentResponsePayload(f: ResponseFacts): WebhookPayload<'incident.response'> {
  return {
    type: 'incident.response',
    timestamp: f.event.eventTime,
    data: {
      incidentId: f.incident.id,
      originId: f.incident.originId,
      deviceId: f.event.deviceId,
      eventId: f.event.id,
      callsign: f.callsign,
      status: f.status,
      responseId: f.responseId,
      time: f.time,
    },
  };
}

/** incident.closed: an incident deleted while open has no timeClosed; it closed when it was deleted */
export function incidentClosedPayload(f: ClosedFacts): WebhookPayload<'incident.closed'> {
  return {
    type: 'incident.closed',
    timestamp: f.at,
    data: { incidentId: f.incident.id, originId: f.incident.originId, timeClosed: f.incident.timeClosed ?? f.at, deleted: f.deleted },
  };
}

/** every event type's constructor: an event type of the spec missing here does not compile */
export const WEBHOOK_PAYLOADS: { readonly [K in WebhookEventType]: (facts: WebhookFacts[K]) => WebhookPayload<K> } = {
  'incident.delivery': incidentDeliveryPayload,
  'incident.response': incidentResponsePayload,
  'incident.closed': incidentClosedPayload,
};

/** the body every attempt sends, exactly (the signature covers these bytes) */
export function webhookBody(payload: WebhookPayload): string {
  return JSON.stringify(payload);
}

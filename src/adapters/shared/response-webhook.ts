// The incident.response webhook event (DESIGN sections 10 and 11) of an answer that moved its
// assignment forward, as both adapters' response units of work write it: data carries the device,
// the incidentResponse event's id and attributes (callsign, status, responseId) and the time the
// status was reached (the device's, bounded by receipt: domain/response.ts).
import type { Incident } from '../../domain/incident.js';
import type { WebhookEvent } from '../../domain/webhook.js';
import type { EventView } from '../../ports/incidents.js';

export function responseWebhookEvent(incident: Incident, event: EventView, time: string): WebhookEvent {
  return {
    type: 'incident.response',
    incidentId: incident.id,
    originId: incident.originId,
    timestamp: event.eventTime,
    data: { deviceId: event.deviceId, eventId: event.id, ...event.attributes, time },
  };
}

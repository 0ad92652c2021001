// Responders answer (DESIGN section 10): a device's answer to an incident, from its socket's
// `response` frame or POST /incidents/{id}/responses, is one unit of work of the response store
// port, deciding with the pure rules of domain/response.ts; the incidentResponse event it wrote
// is published on the bus once durable (user sockets, other nodes). And the responders of an
// incident, for a user who may see it.
import type { Caller } from '../domain/incident.js';
import { refuse } from '../domain/refusal.js';
import { decideResponse, type Responder, type ResponseInput, type ResponseResult } from '../domain/response.js';
import type { Bus } from '../ports/bus.js';
import type { Clock } from '../ports/clock.js';
import type { IncidentStorePort } from '../ports/incidents.js';
import type { ResponseStorePort } from '../ports/responses.js';
import { NO_SUCH_INCIDENT } from './incidents.js';

export class ResponseService {
  constructor(
    private readonly store: ResponseStorePort,
    private readonly incidents: IncidentStorePort,
    private readonly bus: Bus,
    private readonly clock: Clock,
  ) {}

  /** The device's answer (the device is authenticated and enabled): accepted, or why not. */
  async respond(deviceId: number, answer: ResponseInput): Promise<ResponseResult> {
    // a UUID names one answer however it is spelt
    const input: ResponseInput = { ...answer, responseId: answer.responseId.toLowerCase() };
    const outcome = await this.store.respond(deviceId, input, (ctx) => decideResponse(input, ctx), this.clock.now().toISOString());
    // durable: user sockets (and other nodes) may hear of it now
    if (outcome.events.length > 0) this.bus.publish('written', outcome.events);
    return outcome.result;
  }

  /** who was alerted and what each answered, for a caller with permission on the incident */
  async responders(caller: Caller, incidentId: number): Promise<Responder[]> {
    const found = await this.incidents.get(caller, incidentId);
    // one the caller has no permission on is answered as one that does not exist (issue 36)
    if (found === 'NOT_FOUND' || found === 'FORBIDDEN') throw refuse.notFound(NO_SUCH_INCIDENT);
    return this.store.responders(incidentId);
  }
}

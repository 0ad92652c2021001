// Handler types derived from the generated `operations`: a handlers object that misses an
// operationId, or reads a body field the spec does not have, does not compile.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { components, operations, webhooks } from '../../generated/api.js';

/** the spec's `webhooks` operations: requests the service sends (domain/webhook-payloads.ts), not serves */
type Sent = webhooks[keyof webhooks]['post'];
/** the operations the service serves: every operation of the spec but the webhooks it sends */
export type OperationId = { [K in keyof operations]: operations[K] extends Sent ? never : K }[keyof operations];
export type Schemas = components['schemas'];

type BodyOf<K extends OperationId> = operations[K] extends { requestBody?: { content: infer C } }
  ? C[keyof C]
  : operations[K] extends { requestBody: { content: infer C } }
    ? C[keyof C]
    : undefined;
type QueryOf<K extends OperationId> = operations[K]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never;
type ParamsOf<K extends OperationId> = operations[K]['parameters'] extends { path: infer P } ? P : never;

export type Req<K extends OperationId> = FastifyRequest<{ Body: BodyOf<K>; Querystring: QueryOf<K>; Params: ParamsOf<K> }>;
export type Handler<K extends OperationId> = (req: Req<K>, reply: FastifyReply) => Promise<unknown>;
export type OperationHandlers = { [K in OperationId]: Handler<K> };

// The domain's shapes are the spec's, field for field: a field added to openapi.yaml and not to
// src/domain (or the other way round) fails to compile here, so none is dropped silently.
import type { CreateBody, EventAttributes, Incident, StatusReport, UpdateBody } from '../domain/incident.js';
import type { EventView } from '../ports/incidents.js';
import type { AssignmentStatus, Responder, ResponseResult, ResponseStatus } from '../domain/response.js';
import type { UserFields } from '../services/users.js';
import type { DeviceFields } from '../services/devices.js';
import type { WebhookBody } from '../services/webhooks.js';
import type { WakeTargetBody } from '../services/wake-targets.js';
import type { WakeTargetRecord } from '../ports/wake-targets.js';

type Assignable<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type SameKeys<A, B> = Assignable<keyof A, keyof B>;
/** the same fields, of the same types */
type Same<A, B> = Assignable<A, B> extends true ? SameKeys<A, B> : false;
const domainIsTheSpec: [
  Same<Incident, Schemas['Incident']>,
  SameKeys<CreateBody, Schemas['IncidentCreate']>,
  SameKeys<UpdateBody, Schemas['IncidentUpdate']>,
  Assignable<StatusReport['deviceStatuses'], Schemas['DeviceStatusReport']['details']['deviceStatuses']>,
  SameKeys<EventView, Schemas['Event']>,
  SameKeys<EventAttributes, Schemas['Event']['attributes']>,
  // the services' request shapes (written out there: services do not import generated/)
  Same<Omit<UserFields, 'id'>, Schemas['UserFields']>,
  // id, status and lastUpdate in a device body are server-owned: accepted and ignored
  Same<DeviceFields, Omit<Schemas['DeviceWrite'], 'id' | 'status' | 'lastUpdate'>>,
  // responders answer (domain/response.ts)
  Same<ResponseStatus, Schemas['ResponseStatus']>,
  Same<AssignmentStatus, Schemas['AssignmentStatus']>,
  SameKeys<ResponseResult, Schemas['ResponseResult']>,
  SameKeys<Responder, Schemas['Responder']>,
  SameKeys<Responder['delivery'], Schemas['Responder']['delivery']>,
  SameKeys<Required<Responder['response']['times']>, Required<Schemas['Responder']['response']['times']>>,
  Same<WebhookBody, Schemas['WebhookWrite']>,
  // wake targets (DESIGN section 14): the body the service takes, and what it answers
  Assignable<Schemas['WakeTargetCreate'], WakeTargetBody>,
  Assignable<WakeTargetRecord, Schemas['WakeTarget']>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
void domainIsTheSpec;

// Handler types derived from the generated `operations`: a handlers object that misses an
// operationId, or reads a body field the spec does not have, does not compile.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { components, operations } from '../../generated/api.js';

export type OperationId = keyof operations;
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

// The OpenAPI document, parsed once: glue binds routes from it, swagger serves it, and the
// authentication hook reads each operation's security requirements from it.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { specPath } from '../paths.js';

export type SecurityRequirement = Record<string, string[]>;
interface OperationObject {
  operationId?: string;
  security?: SecurityRequirement[];
  requestBody?: { required?: boolean; content?: Record<string, unknown> };
}
export interface OpenApiDocument {
  info: { version: string };
  security?: SecurityRequirement[];
  paths: Record<string, Record<string, OperationObject>>;
  [key: string]: unknown;
}

let cached: OpenApiDocument | undefined;

/** A fresh deep copy each call: glue and swagger mutate what they are given. */
export function loadSpec(): OpenApiDocument {
  cached ??= parse(readFileSync(specPath, 'utf8')) as OpenApiDocument;
  return structuredClone(cached);
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);

/** operationId -> the security schemes that may authenticate it ([] = public) */
export function securityByOperation(doc: OpenApiDocument): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const item of Object.values(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.has(method) || !op.operationId) continue;
      const reqs = op.security ?? doc.security ?? [];
      out.set(op.operationId, reqs.flatMap((r) => Object.keys(r)));
    }
  }
  return out;
}

export interface BodyRule {
  required: boolean;
  /** the declared media types, lower case, without parameters */
  mediaTypes: string[];
}

/** operationId -> what its request body may be (absent: the operation takes no body) */
export function requestBodies(doc: OpenApiDocument): Map<string, BodyRule> {
  const out = new Map<string, BodyRule>();
  for (const item of Object.values(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.has(method) || !op.operationId || !op.requestBody) continue;
      out.set(op.operationId, {
        required: op.requestBody.required === true,
        mediaTypes: Object.keys(op.requestBody.content ?? {}).map((t) => t.toLowerCase()),
      });
    }
  }
  return out;
}

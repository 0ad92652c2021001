// Request validation from the spec with Ajv's draft 2020-12 dialect (OpenAPI 3.1 schemas use
// `type: [x, 'null']` and `unevaluatedProperties`, which fastify's default draft-07 Ajv
// does not know). Bodies are never coerced: `"latitude": "12"` is a 400. Query and path
// strings are coerced to the declared integer/boolean types.
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { instant } from '../clock.js';
import type { FastifySchemaCompiler } from 'fastify';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** ajv-formats plus the OpenAPI numeric formats and the service's own reading of date-time. */
export function addServiceFormats(ajv: Ajv2020): Ajv2020 {
  addFormats(ajv);
  // OpenAPI's numeric formats: ranges are stated with minimum/maximum in the spec.
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  // RFC 3339 (ajv-formats' check), and an instant the service can store and give back in
  // the same format: a date-time whose UTC year leaves 0000-9999 is refused with 400.
  const rfc3339 = fullFormats['date-time'] as { validate: (s: string) => boolean };
  ajv.addFormat('date-time', { type: 'string', validate: (s: string) => rfc3339.validate(s) && instant(s) !== null });
  return ajv;
}

function makeAjv(coerce: boolean): Ajv2020 {
  const ajv = new Ajv2020({
    strict: true,
    strictRequired: false,
    allErrors: true,
    allowUnionTypes: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
  });
  addServiceFormats(ajv);
  return ajv;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = makeAjv(false);
  const strings = makeAjv(true);
  return ({ schema, httpPart }) => (httpPart === 'body' ? body : strings).compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
}

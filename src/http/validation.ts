// Request validation from the spec with Ajv's draft 2020-12 dialect (OpenAPI 3.1 schemas use
// `type: [x, 'null']` and `unevaluatedProperties`, which fastify's default draft-07 Ajv
// does not know). Bodies are never coerced: `"latitude": "12"` is a 400. Query and path
// integers must be written in decimal digits; then they, and booleans, are coerced to their
// declared types.
//
// Bounded work per request (DESIGN section 7): a JSON body is refused before it is parsed if
// it nests deeper than MAX_JSON_DEPTH or is not UTF-8, and after it is parsed if a string or
// property name holds a lone surrogate; an array over its `maxItems` is refused without
// validating its items (with `allErrors`, Ajv would otherwise report every one of them).
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { instant } from '../domain/time.js';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { escapePointer, problems, type FieldError } from './problem.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** the deepest a JSON body may nest objects and arrays (the body itself is level 1) */
export const MAX_JSON_DEPTH = 32;

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
    // oneOf by a tag (the wake targets' `kind`): only the branch the tag names is checked, and its errors reported
    discriminator: true,
  });
  addServiceFormats(ajv);
  return ajv;
}

type Schema = Record<string, unknown>;
const ITEM_KEYWORDS = ['items', 'prefixItems', 'contains', 'minContains', 'maxContains', 'uniqueItems', 'unevaluatedItems'];
const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A copy of a (dereferenced) schema in which every array with a `maxItems` checks its items
 * only when it is within that bound: `{maxItems, if: {maxItems}, then: {items…}}`. An array
 * of 170 000 numbers where 500 callsigns may stand then costs one error, not 170 000.
 */
export function boundArrays(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(boundArrays);
  if (!isSchema(schema)) return schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'enum' || k === 'const' || k === 'default' || k === 'examples' ? v : boundArrays(v);
  // a discriminator's `mapping` (for the generated types) names what each branch's `const` says
  // already; Ajv refuses it, and picks the branch by that const
  if (isSchema(out.discriminator) && 'mapping' in out.discriminator) out.discriminator = { propertyName: out.discriminator.propertyName };
  if (typeof out.maxItems === 'number' && ITEM_KEYWORDS.some((k) => k in out) && !('if' in out)) {
    const then: Schema = {};
    for (const k of ITEM_KEYWORDS) {
      if (k in out) {
        then[k] = out[k];
        delete out[k];
      }
    }
    out.if = { maxItems: out.maxItems };
    out.then = then;
  }
  return out;
}

/** decimal digits (a sign for the range check to refuse): what a path or query integer may be */
const DECIMAL = /^-?[0-9]+$/;

interface AjvError {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  params: Record<string, unknown>;
  message: string;
}
type Validate = ((data: unknown, dataCxt?: unknown) => boolean) & { errors?: AjvError[] | null; schemaEnv?: unknown };

/**
 * Path and query strings: Ajv would read `0x10`, `1e3`, ` 16` and `16.0` as integers
 * (it coerces with `+value`); only decimal digits are taken.
 */
function decimalIntegers(schema: unknown, validate: Validate): Validate {
  const props = isSchema(schema) && isSchema(schema.properties) ? schema.properties : {};
  const integers = Object.entries(props).filter(([, s]) => isSchema(s) && (s.type === 'integer' || (Array.isArray(s.type) && s.type.includes('integer')))).map(([name]) => name);
  if (integers.length === 0) return validate;
  const checked: Validate = (data, dataCxt) => {
    if (isSchema(data)) {
      const errors: AjvError[] = [];
      for (const name of integers) {
        const value = data[name];
        for (const v of Array.isArray(value) ? value : [value]) {
          if (typeof v === 'string' && !DECIMAL.test(v)) {
            errors.push({ instancePath: `/${escapePointer(name)}`, schemaPath: '#/decimal', keyword: 'decimal', params: {}, message: 'must be written in decimal digits' });
            break;
          }
        }
      }
      if (errors.length > 0) {
        checked.errors = errors;
        return false;
      }
    }
    const ok = validate(data, dataCxt);
    checked.errors = validate.errors ?? null;
    return ok;
  };
  // fastify passes the parent object (so that Ajv may coerce the root) to what has a schemaEnv
  checked.schemaEnv = validate.schemaEnv;
  return checked;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = makeAjv(false);
  const strings = makeAjv(true);
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return body.compile(boundArrays(schema) as object) as ReturnType<FastifySchemaCompiler<unknown>>;
    const validate = strings.compile(schema as object) as unknown as Validate;
    return (httpPart === 'params' || httpPart === 'querystring' ? decimalIntegers(schema, validate) : validate) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

/** The error fastify hands the error handler when validation fails: only `validation` is read (errors.ts). */
export function schemaErrorFormatter(_errors: unknown, dataVar: string): Error {
  return new Error(`The request's ${dataVar} is invalid.`);
}

/** Where the JSON text nests objects and arrays deeper than `max`: true. Strings are skipped. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // to the closing quote: the next one not preceded by an odd number of backslashes
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return false;
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

/** String.prototype.isWellFormed (Node 20; TypeScript's lib has it from ES2024) */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** the first string or property name in `value` that is not well-formed Unicode, as a field error */
export function illFormedString(value: unknown, path: string): FieldError | null {
  if (typeof value === 'string') return wellFormed(value) ? null : { path, message: 'is not well-formed Unicode (a lone surrogate)' };
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = illFormedString(value[i], `${path}/${i}`);
      if (found) return found;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    if (!wellFormed(k)) return { path, message: 'has a property name that is not well-formed Unicode (a lone surrogate)' };
    const found = illFormedString(v, `${path}/${escapePointer(k)}`);
    if (found) return found;
  }
  return null;
}

/** a `\u` escape of a surrogate in JSON text (a cheap test before looking for a lone one) */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

type ParserDone = (err: Error | null, body?: unknown) => void;
type JsonParser = (req: FastifyRequest, body: string, done: ParserDone) => void;

/**
 * A content-type parser (parseAs: 'buffer') for JSON bodies around fastify's own (which
 * refuses `__proto__` and `constructor.prototype` keys): the bytes must be UTF-8, the text
 * nest at most MAX_JSON_DEPTH levels, and every string be well-formed Unicode. Deeper
 * bodies would make any later recursion (serialising, storing) overflow the stack.
 */
export function jsonBodyParser(parse: JsonParser) {
  return (req: FastifyRequest, body: Buffer, done: ParserDone): void => {
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      done(problems.badRequest('The body is not valid UTF-8.', [{ path: '/body', message: 'is not valid UTF-8' }]));
      return;
    }
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      done(problems.badRequest(`The body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels.`, [{ path: '/body', message: `nests deeper than ${MAX_JSON_DEPTH} levels` }]));
      return;
    }
    parse(req, text, (err, value) => {
      if (err) return done(err);
      const bad = SURROGATE_ESCAPE.test(text) ? illFormedString(value, '/body') : null;
      if (bad) return done(problems.badRequest(`${bad.path} ${bad.message}.`, [bad]));
      done(null, value);
    });
  };
}

/** what a caller's X-Request-Id may be to be taken (logged and sent back): else one is made */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** fastify's `genReqId`: the caller's X-Request-Id when it is safe, else a random UUID */
export function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const sent = req.headers['x-request-id'];
  return typeof sent === 'string' && SAFE_REQUEST_ID.test(sent) ? sent : crypto.randomUUID();
}

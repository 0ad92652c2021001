// The socket frame types: generated/frames.d.ts from asyncapi.yaml, as generated/api.d.ts is
// from openapi.yaml (issue 37). No maintained npm generator gives clean types for this document
// (Modelina names inline payloads `AnonymousSchema_N` and writes `enum: [true]` as the string
// "true"), and openapi-typescript reads OpenAPI only; so this reads the subset of JSON Schema the
// document uses and refuses anything else, rather than guess a type. Payloads that `$ref`
// openapi.yaml are not derived again: they name openapi-typescript's output
// (`components["schemas"]["Incident"]` of ./api.d.ts), so an incident has one type as it has
// one schema.
//
// Out: one named type per schema (`Ack`, `PushId`, …) and per message (`PushMessage`,
// `AckMessage`, … from the message's `name`), maps `components` and `channels` keyed as in the
// document, and per channel the union of what the service sends (`DeviceFrameToClient`) and of
// what it takes (`DeviceFrameToService`), from the operations (a `send`, or the reply of a
// `receive`, goes to the client).
//
//   npx tsx scripts/generate-frames.ts           writes generated/frames.d.ts
//   npx tsx scripts/generate-frames.ts --check   exit 1 when the file is not what it would write
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'yaml';

type Json = Record<string, any>;

export interface FramesOptions {
  /** the file asyncapi.yaml's cross-document `$ref`s name (`openapi.yaml#/components/schemas/X`) */
  openapiFile: string;
  /** openapi.yaml itself: every schema named across documents must be there */
  openapi: Json;
  /** the module openapi-typescript wrote, as imported from the generated file */
  apiModule: string;
}

/** A schema keyword the generator does not turn into a type, or a reference it cannot follow. */
export class UnsupportedSchema extends Error {
  override name = 'UnsupportedSchema';
}

// Keywords that constrain values at run time (checked by the service and by the contract tests)
// but have no TypeScript form, and annotations; `format`, `default` and `deprecated` become tags.
const RUNTIME_ONLY = new Set([
  'title', 'description', 'examples', 'example', '$comment', 'format', 'default', 'deprecated', 'readOnly', 'writeOnly',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minLength', 'maxLength', 'pattern', 'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties',
  'propertyNames',
]);
const TYPED = new Set(['$ref', 'type', 'const', 'enum', 'properties', 'required', 'additionalProperties', 'items', 'allOf', 'oneOf', 'anyOf']);
const RESERVED = new Set(['components', 'channels', 'openapi']);
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

const pascal = (name: string): string => name.replace(/(^|[^A-Za-z0-9]+)([A-Za-z0-9])/g, (_m, _sep, c: string) => c.toUpperCase());
const key = (name: string): string => (IDENTIFIER.test(name) ? name : JSON.stringify(name));
const literal = (value: unknown, at: string): string => {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return JSON.stringify(value);
  throw new UnsupportedSchema(`${at}: a const or enum value that is not a string, number, boolean or null`);
};
const union = (parts: string[]): string => [...new Set(parts)].join(' | ') || 'never';
/** whether a type is a union at its top level (`A | { b: C | D }` is, `{ b: C | D }` is not) */
function isUnion(type: string): boolean {
  let depth = 0;
  let quote = '';
  for (let i = 0; i < type.length; i++) {
    const c = type[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === '"') quote = c;
    else if ('{([<'.includes(c)) depth++;
    else if ('})]>'.includes(c)) depth--;
    else if (c === '|' && depth === 0) return true;
  }
  return false;
}
/** parenthesised where a union would bind wrongly (`(A | B)[]`, `(A | B) & C`) */
const tight = (type: string): string => (isUnion(type) ? `(${type})` : type);

function jsdoc(schema: Json, indent: string): string {
  const lines: string[] = [];
  if (typeof schema.description === 'string') lines.push(...schema.description.trim().split('\n'));
  if (typeof schema.format === 'string') lines.push(`@format ${schema.format}`);
  if (schema.default !== undefined) lines.push(`@default ${JSON.stringify(schema.default)}`);
  if (schema.deprecated === true) lines.push('@deprecated');
  if (lines.length === 0) return '';
  const safe = lines.map((l) => l.replace(/\*\//g, '*\\/').trimEnd());
  if (safe.length === 1) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((l) => `${indent} *${l ? ` ${l}` : ''}`).join('\n')}\n${indent} */\n`;
}

class Emitter {
  constructor(
    private readonly doc: Json,
    private readonly opts: FramesOptions,
  ) {}

  /** the TypeScript type of a schema; `at` is its JSON pointer, for the errors */
  type(schema: unknown, at: string, indent: string): string {
    if (schema === true || (schema !== null && typeof schema === 'object' && Object.keys(schema).length === 0)) return 'unknown';
    if (schema === false) return 'never';
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) throw new UnsupportedSchema(`${at}: not a schema`);
    const s = schema as Json;
    for (const k of Object.keys(s)) {
      if (!TYPED.has(k) && !RUNTIME_ONLY.has(k)) throw new UnsupportedSchema(`${at}: the keyword "${k}" has no type here; extend scripts/generate-frames.ts`);
    }
    if (typeof s.$ref === 'string') {
      const others = Object.keys(s).filter((k) => TYPED.has(k) && k !== '$ref');
      if (others.length > 0) throw new UnsupportedSchema(`${at}: "$ref" beside ${others.join(', ')}`);
      return this.ref(s.$ref, at);
    }
    const parts: string[] = [];
    if ('const' in s) parts.push(literal(s.const, `${at}/const`));
    else if (Array.isArray(s.enum)) parts.push(union(s.enum.map((v: unknown, i: number) => literal(v, `${at}/enum/${i}`))));
    else parts.push(this.byType(s, at, indent));
    for (const [word, join] of [['oneOf', ' | '], ['anyOf', ' | '], ['allOf', ' & ']] as const) {
      if (!Array.isArray(s[word])) continue;
      const each = (s[word] as unknown[]).map((sub, i) => this.type(sub, `${at}/${word}/${i}`, indent));
      parts.push(join === ' & ' ? each.map(tight).join(' & ') : union(each));
    }
    const typed = parts.filter((p) => p !== 'unknown');
    if (typed.length === 0) return 'unknown';
    return typed.length === 1 ? typed[0]! : typed.map(tight).join(' & ');
  }

  private byType(s: Json, at: string, indent: string): string {
    const types: unknown[] = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
    // an object schema that only composes others (allOf/oneOf/anyOf) is typed by them
    const composes = ['allOf', 'oneOf', 'anyOf'].some((k) => Array.isArray(s[k])) && !s.properties && s.additionalProperties === undefined;
    if (types.length === 0 || (composes && types.length === 1 && types[0] === 'object')) {
      if (s.properties || s.additionalProperties !== undefined) return this.object(s, at, indent);
      if (s.items) return this.array(s, at, indent);
      return 'unknown';
    }
    return union(
      types.map((t) => {
        switch (t) {
          case 'string':
            return 'string';
          case 'integer':
          case 'number':
            return 'number';
          case 'boolean':
            return 'boolean';
          case 'null':
            return 'null';
          case 'object':
            return this.object(s, at, indent);
          case 'array':
            return this.array(s, at, indent);
          default:
            throw new UnsupportedSchema(`${at}/type: unknown type ${JSON.stringify(t)}`);
        }
      }),
    );
  }

  private array(s: Json, at: string, indent: string): string {
    return `${tight(this.type(s.items ?? true, `${at}/items`, indent))}[]`;
  }

  private object(s: Json, at: string, indent: string): string {
    const inner = `${indent}    `;
    const required = new Set<string>(Array.isArray(s.required) ? s.required : []);
    const props = Object.entries((s.properties ?? {}) as Json);
    const lines: string[] = [];
    for (const [name, sub] of props) {
      lines.push(`${jsdoc(sub as Json, inner)}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${this.type(sub, `${at}/properties/${name}`, inner)};`);
    }
    const extra = s.additionalProperties;
    if (extra === true || (props.length === 0 && extra === undefined)) lines.push(`${inner}[key: string]: unknown;`);
    else if (extra !== undefined && extra !== false) {
      if (props.length > 0) throw new UnsupportedSchema(`${at}: "additionalProperties" with a schema beside "properties"`);
      lines.push(`${inner}[key: string]: ${this.type(extra, `${at}/additionalProperties`, inner)};`);
    }
    return lines.length === 0 ? 'Record<string, never>' : `{\n${lines.join('\n')}\n${indent}}`;
  }

  private ref(ref: string, at: string): string {
    const local = /^#\/components\/schemas\/([^/]+)$/.exec(ref);
    if (local) {
      if (!this.doc.components?.schemas?.[local[1]!]) throw new UnsupportedSchema(`${at}: ${ref} does not resolve`);
      return local[1]!;
    }
    const cross = /^([^#]+)#\/components\/schemas\/([^/]+)$/.exec(ref);
    if (cross && cross[1] === this.opts.openapiFile) {
      if (!this.opts.openapi.components?.schemas?.[cross[2]!]) throw new UnsupportedSchema(`${at}: ${ref} does not resolve in ${this.opts.openapiFile}`);
      return `openapi["schemas"][${JSON.stringify(cross[2])}]`;
    }
    throw new UnsupportedSchema(`${at}: the $ref ${ref} is neither #/components/schemas/… nor ${this.opts.openapiFile}#/components/schemas/…`);
  }
}

interface Named {
  /** the key under components.messages */
  id: string;
  /** the TypeScript name */
  name: string;
  message: Json;
}

/** Follows a channel's or operation's message `$ref` to the component message it names. */
function componentMessage(doc: Json, ref: unknown, at: string, seen = 0): string {
  if (typeof ref !== 'string' || seen > 5) throw new UnsupportedSchema(`${at}: a message must be a $ref to #/components/messages/…`);
  const component = /^#\/components\/messages\/([^/]+)$/.exec(ref);
  if (component) {
    if (!doc.components?.messages?.[component[1]!]) throw new UnsupportedSchema(`${at}: ${ref} does not resolve`);
    return component[1]!;
  }
  const inChannel = /^#\/channels\/([^/]+)\/messages\/([^/]+)$/.exec(ref);
  if (inChannel) return componentMessage(doc, doc.channels?.[inChannel[1]!]?.messages?.[inChannel[2]!]?.$ref, ref, seen + 1);
  throw new UnsupportedSchema(`${at}: the $ref ${ref} names no message`);
}

/** The text of generated/frames.d.ts for an AsyncAPI 3.0 document. */
export function framesDts(doc: Json, opts: FramesOptions): string {
  if (typeof doc.asyncapi !== 'string' || !doc.asyncapi.startsWith('3.')) throw new UnsupportedSchema(`asyncapi ${doc.asyncapi}: only AsyncAPI 3 documents are read`);
  const emit = new Emitter(doc, opts);
  const out: string[] = [
    '/**',
    ' * This file was auto-generated by scripts/generate-frames.ts from asyncapi.yaml (npm run generate).',
    ' * Do not make direct changes to the file.',
    ' */',
    '',
    `import type { components as openapi } from ${JSON.stringify(opts.apiModule)};`,
    '',
  ];
  const taken = new Map<string, string>();
  const claim = (name: string, what: string): string => {
    if (!IDENTIFIER.test(name)) throw new UnsupportedSchema(`${what}: "${name}" is not a TypeScript name`);
    const other = taken.get(name) ?? (RESERVED.has(name) ? 'the generated maps' : undefined);
    if (other) throw new UnsupportedSchema(`${what}: the type name ${name} is also taken by ${other}`);
    taken.set(name, what);
    return name;
  };

  const schemas = Object.entries((doc.components?.schemas ?? {}) as Json);
  for (const [id, schema] of schemas) {
    const name = claim(id, `#/components/schemas/${id}`);
    out.push(`${jsdoc(schema, '')}export type ${name} = ${emit.type(schema, `#/components/schemas/${id}`, '')};`, '');
  }

  const messages: Named[] = Object.entries((doc.components?.messages ?? {}) as Json).map(([id, message]) => {
    const name = claim(`${pascal(typeof message.name === 'string' ? message.name : id)}Message`, `#/components/messages/${id}`);
    return { id, name, message };
  });
  for (const { id, name, message } of messages) {
    const at = `#/components/messages/${id}`;
    if (message.$ref) throw new UnsupportedSchema(`${at}: a component message that is a $ref`);
    if (message.payload === undefined) throw new UnsupportedSchema(`${at}: a message without a payload`);
    if (message.payload?.schemaFormat !== undefined) throw new UnsupportedSchema(`${at}/payload: a multi-format schema (schemaFormat)`);
    const comment = jsdoc({ description: [message.title, message.summary, message.description].filter((x) => typeof x === 'string').join(': ') || undefined }, '');
    out.push(`${comment}export type ${name} = ${emit.type(message.payload, `${at}/payload`, '')};`, '');
  }
  const nameOf = new Map(messages.map((m) => [m.id, m.name]));

  // per channel: what the service sends (its `send` operations, and the replies of its
  // `receive` ones) and what it takes (the other way round)
  const channels = Object.entries((doc.channels ?? {}) as Json);
  const flows = new Map(channels.map(([id]) => [id, { toClient: [] as string[], toService: [] as string[] }]));
  for (const [opId, op] of Object.entries((doc.operations ?? {}) as Json)) {
    const at = `#/operations/${opId}`;
    const channelOf = (ref: unknown, where: string): { toClient: string[]; toService: string[] } => {
      const m = typeof ref === 'string' ? /^#\/channels\/([^/]+)$/.exec(ref) : null;
      const flow = m ? flows.get(m[1]!) : undefined;
      if (!flow) throw new UnsupportedSchema(`${where}: the channel ${String(ref)} is not declared`);
      return flow;
    };
    if (op.action !== 'send' && op.action !== 'receive') throw new UnsupportedSchema(`${at}/action: ${op.action}`);
    const channelRef = op.channel?.$ref;
    const own = channelOf(channelRef, `${at}/channel`);
    const ids = (list: unknown, ch: unknown, where: string): string[] => {
      // no `messages`: every message of the channel (AsyncAPI 3.0)
      if (list === undefined) {
        const m = /^#\/channels\/([^/]+)$/.exec(String(ch));
        return Object.keys(doc.channels[m![1]!].messages ?? {}).map((k) => componentMessage(doc, `#/channels/${m![1]}/messages/${k}`, where));
      }
      return (list as Json[]).map((m, i) => componentMessage(doc, m.$ref, `${where}/${i}`));
    };
    (op.action === 'send' ? own.toClient : own.toService).push(...ids(op.messages, channelRef, `${at}/messages`));
    if (op.reply) {
      const replyChannel = op.reply.channel?.$ref ?? channelRef;
      const reply = channelOf(replyChannel, `${at}/reply/channel`);
      (op.action === 'send' ? reply.toService : reply.toClient).push(...ids(op.reply.messages, replyChannel, `${at}/reply/messages`));
    }
  }
  const flowNames: [string, string, string][] = [];
  for (const [id, channel] of channels) {
    const flow = flows.get(id)!;
    const names = (list: string[]): string => union(list.map((m) => nameOf.get(m)!));
    const title = [channel.title, typeof channel.address === 'string' ? `\`${channel.address}\`` : ''].filter(Boolean).join(', ');
    flowNames.push([
      id,
      claim(`${pascal(id)}FrameToClient`, `#/channels/${id} (service → client)`),
      claim(`${pascal(id)}FrameToService`, `#/channels/${id} (client → service)`),
    ]);
    const [, toClient, toService] = flowNames.at(-1)!;
    out.push(`/** ${title}: a frame the service sends. */`, `export type ${toClient} = ${names(flow.toClient)};`, '');
    out.push(`/** ${title}: a frame the service takes. */`, `export type ${toService} = ${names(flow.toService)};`, '');
  }

  out.push('/** asyncapi.yaml\'s components, keyed as there. */', 'export interface components {', '    schemas: {');
  for (const [id] of schemas) out.push(`        ${key(id)}: ${id};`);
  out.push('    };', '    messages: {');
  for (const m of messages) out.push(`        ${key(m.id)}: ${m.name};`);
  out.push('    };', '}', '');
  out.push('/** Each channel: its address, the frames the service sends on it and those it takes. */', 'export interface channels {');
  for (const [id, toClient, toService] of flowNames) {
    const address = (doc.channels[id] as Json).address;
    out.push(`    ${key(id)}: {`);
    if (typeof address === 'string') out.push(`        address: ${JSON.stringify(address)};`);
    out.push(`        toClient: ${toClient};`, `        toService: ${toService};`, '    };');
  }
  out.push('}', '');
  return out.join('\n');
}

const root = join(import.meta.dirname, '..');
export const framesPath = join(root, 'generated', 'frames.d.ts');

/** What generated/frames.d.ts should hold for the project's asyncapi.yaml and openapi.yaml. */
export function projectFrames(asyncapiText = readFileSync(join(root, 'asyncapi.yaml'), 'utf8')): string {
  return framesDts(parse(asyncapiText), {
    openapiFile: 'openapi.yaml',
    openapi: parse(readFileSync(join(root, 'openapi.yaml'), 'utf8')),
    apiModule: './api.js',
  });
}

function main(args: string[]): void {
  const text = projectFrames();
  if (args.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(framesPath, 'utf8');
    } catch {
      // missing: out of date
    }
    if (current !== text) {
      console.error("drift: generated/frames.d.ts is out of date with asyncapi.yaml; run 'npm run generate' and commit.");
      process.exit(1);
    }
    return;
  }
  writeFileSync(framesPath, text);
  console.log('asyncapi.yaml → generated/frames.d.ts');
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UnsupportedSchema)) throw err;
    console.error(`asyncapi.yaml: ${err.message}`);
    process.exit(1);
  }
}

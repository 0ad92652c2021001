// The socket frame types (scripts/generate-frames.ts → generated/frames.d.ts): what the
// generator makes of small AsyncAPI documents, what it refuses, that the committed file is what
// it makes of asyncapi.yaml, and that the TypeScript compiler takes every example of the
// document with those types and refuses frames the document refuses.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { framesDts, framesPath, projectFrames } from '../../scripts/generate-frames.js';
import { asyncapi } from '../fixtures/asyncapi.js';

type Json = Record<string, any>;

const openapi = { components: { schemas: { Incident: { type: 'object' }, Id: { type: 'integer' } } } };
const OPTS = { openapiFile: 'openapi.yaml', openapi, apiModule: './api.js' };

/** a one-channel document: the service sends `sent`, takes `taken` (answered by `replies`) */
function doc(messages: Json, flows: { sent?: string[]; taken?: string[]; replies?: string[] }, schemas: Json = {}): Json {
  const refs = (ids: string[]) => ids.map((id) => ({ $ref: `#/channels/dev/messages/${id}` }));
  const operations: Json = {};
  if (flows.sent) operations.sendThem = { action: 'send', channel: { $ref: '#/channels/dev' }, messages: refs(flows.sent) };
  if (flows.taken) {
    operations.takeThem = { action: 'receive', channel: { $ref: '#/channels/dev' }, messages: refs(flows.taken) };
    if (flows.replies) operations.takeThem.reply = { channel: { $ref: '#/channels/dev' }, messages: refs(flows.replies) };
  }
  return {
    asyncapi: '3.0.0',
    channels: { dev: { address: '/ws/dev', messages: Object.fromEntries(Object.keys(messages).map((id) => [id, { $ref: `#/components/messages/${id}` }])) } },
    operations,
    components: { schemas, messages },
  };
}
const msg = (payload: Json, name?: string): Json => ({ ...(name ? { name } : {}), payload });

t.test('when a payload has booleans, then they are boolean types, and `enum: [true]` is the literal true, never the string "true"', async (t) => {
  const out = framesDts(
    doc(
      {
        flag: msg({
          type: 'object',
          additionalProperties: false,
          required: ['on', 'deleted'],
          properties: { on: { type: 'boolean' }, deleted: { type: 'boolean', enum: [true] }, never: { const: false } },
        }),
      },
      { sent: ['flag'] },
    ),
    OPTS,
  );
  t.match(out, /\n {4}on: boolean;\n/);
  t.match(out, /\n {4}deleted: true;\n/);
  t.match(out, /\n {4}never\?: false;\n/);
  t.notMatch(out, /"true"|"false"/);
});

t.test('when messages and schemas are named, then each gets its own named type from that name, and nothing is anonymous', async (t) => {
  const out = framesDts(
    doc(
      {
        ping: msg({ $ref: '#/components/schemas/Ping' }),
        'status-report': msg({ type: 'object', properties: { ok: { type: 'boolean' } } }, 'statusReport'),
        bare: msg({ type: 'string' }),
      },
      { sent: ['ping', 'status-report', 'bare'] },
      { Ping: { type: 'object', required: ['type'], properties: { type: { const: 'ping' } } } },
    ),
    OPTS,
  );
  t.match(out, /export type Ping = \{\n {4}type: "ping";\n\};/);
  t.match(out, /export type PingMessage = Ping;/);
  t.match(out, /export type StatusReportMessage = \{\n {4}ok\?: boolean;\n\};/, 'the message name, not its key');
  t.match(out, /export type BareMessage = string;/, 'the key when there is no name');
  t.match(out, /"status-report": StatusReportMessage;/, 'the components map keeps the keys');
  t.notMatch(out, /anonymous/i);
});

t.test('when a channel has sends, receives and a reply, then the client-bound and service-bound unions follow the operations', async (t) => {
  const payload = { type: 'string' };
  const out = framesDts(
    doc({ push: msg(payload), error: msg(payload), ack: msg(payload), answer: msg(payload), result: msg(payload) }, { sent: ['push', 'error'], taken: ['ack', 'answer'], replies: ['result'] }),
    OPTS,
  );
  t.match(out, /export type DevFrameToClient = PushMessage \| ErrorMessage \| ResultMessage;/, 'a reply to a receive goes to the client');
  t.match(out, /export type DevFrameToService = AckMessage \| AnswerMessage;/);
  t.match(out, /dev: \{\n {8}address: "\/ws\/dev";\n {8}toClient: DevFrameToClient;\n {8}toService: DevFrameToService;/);
  const listening = framesDts(doc({ note: msg(payload) }, { sent: ['note'] }), OPTS);
  t.match(listening, /export type DevFrameToService = never;/, 'a channel that takes nothing takes never');
  const all = doc({ a: msg(payload), b: msg(payload) }, {});
  all.operations.sendAll = { action: 'send', channel: { $ref: '#/channels/dev' } };
  t.match(framesDts(all, OPTS), /export type DevFrameToClient = AMessage \| BMessage;/, 'an operation without messages sends all of its channel');
});

t.test('when a payload refers to openapi.yaml, then it names openapi-typescript’s type, and a schema missing there is refused', async (t) => {
  const out = framesDts(doc({ m: msg({ type: 'object', properties: { incident: { $ref: 'openapi.yaml#/components/schemas/Incident' } } }) }, { sent: ['m'] }), OPTS);
  t.match(out, /import type \{ components as openapi \} from "\.\/api\.js";/);
  t.match(out, /incident\?: openapi\["schemas"\]\["Incident"\];/);
  t.throws(() => framesDts(doc({ m: msg({ $ref: 'openapi.yaml#/components/schemas/Nope' }) }, { sent: ['m'] }), OPTS), { name: 'UnsupportedSchema', message: /does not resolve in openapi.yaml/ });
  t.throws(() => framesDts(doc({ m: msg({ $ref: 'other.yaml#/components/schemas/Incident' }) }, { sent: ['m'] }), OPTS), /neither/);
  t.throws(() => framesDts(doc({ m: msg({ $ref: '#/components/schemas/Missing' }) }, { sent: ['m'] }), OPTS), /does not resolve/);
});

t.test('when types nest, then unions are parenthesised where they would bind wrongly and composition maps to & and |', async (t) => {
  const out = framesDts(
    doc(
      {
        m: msg({
          type: 'object',
          additionalProperties: false,
          required: ['list', 'both', 'either'],
          properties: {
            list: { type: 'array', items: { type: ['string', 'null'] } },
            both: { allOf: [{ $ref: '#/components/schemas/A' }, { type: 'object', properties: { b: { enum: ['x', 'y'] } } }] },
            either: { oneOf: [{ type: 'integer' }, { type: 'string' }] },
            extra: { type: 'object', additionalProperties: { type: 'number' } },
            open: { type: 'object' },
          },
        }),
      },
      { sent: ['m'] },
      { A: { type: 'object', properties: { a: { type: 'string', format: 'date-time' } } } },
    ),
    OPTS,
  );
  t.match(out, /list: \(string \| null\)\[\];/);
  t.match(out, /both: A & \{\n {8}b\?: "x" \| "y";\n {4}\};/);
  t.match(out, /either: number \| string;/);
  t.match(out, /extra\?: \{\n {8}\[key: string\]: number;\n {4}\};/);
  t.match(out, /open\?: \{\n {8}\[key: string\]: unknown;\n {4}\};/);
  t.match(out, /@format date-time/);
});

t.test('when a schema uses a keyword with no type here, a name clashes, or a message is not a $ref, then generation fails and says where', async (t) => {
  for (const [keyword, schema] of [
    ['not', { not: { type: 'string' } }],
    ['if', { if: { type: 'string' }, then: { minLength: 1 } }],
    ['patternProperties', { type: 'object', patternProperties: { '^x': { type: 'string' } } }],
  ] as const) {
    t.throws(() => framesDts(doc({ m: msg(schema) }, { sent: ['m'] }), OPTS), new RegExp(`#/components/messages/m/payload: the keyword "${keyword}"`), keyword);
  }
  t.throws(() => framesDts(doc({ ack: msg({ type: 'string' }) }, { sent: ['ack'] }, { AckMessage: { type: 'string' } }), OPTS), /AckMessage is also taken/);
  t.throws(() => framesDts(doc({ m: msg({ type: 'string' }) }, { sent: ['m'] }, { channels: { type: 'string' } }), OPTS), /taken by the generated maps/);
  t.throws(() => framesDts(doc({ m: msg({ type: 'object', properties: { x: { const: { a: 1 } } } }) }, { sent: ['m'] }), OPTS), /const or enum value/);
  const inline = doc({ m: msg({ type: 'string' }) }, {});
  inline.operations.s = { action: 'send', channel: { $ref: '#/channels/dev' }, messages: [{ payload: { type: 'string' } }] };
  t.throws(() => framesDts(inline, OPTS), /#\/operations\/s\/messages\/0: a message must be a \$ref/);
  t.throws(() => framesDts({ ...doc({}, {}), asyncapi: '2.6.0' }, OPTS), /only AsyncAPI 3/);
});

t.test('when asyncapi.yaml is read, then generated/frames.d.ts is what the generator makes of it (npm run generate)', async (t) => {
  t.equal(readFileSync(framesPath, 'utf8'), projectFrames(), 'run npm run generate and commit generated/');
  const changed = readFileSync(join(import.meta.dirname, '../../asyncapi.yaml'), 'utf8').replace('const: ack', 'const: acknowledge');
  t.not(projectFrames(changed), projectFrames(), 'an edit of a payload changes the output (the drift check would see it)');
});

/** TypeScript's errors for each file, compiled together with generated/frames.d.ts */
function compile(files: Record<string, string>): Record<string, string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'frames-'));
  try {
    const names = Object.keys(files).map((f) => join(dir, `${f}.ts`));
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, `${f}.ts`), text);
    const program = ts.createProgram(names, {
      strict: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts'],
      types: [],
      skipLibCheck: false,
    });
    const out: Record<string, string[]> = {};
    for (const f of Object.keys(files)) {
      const source = program.getSourceFile(join(dir, `${f}.ts`))!;
      out[f] = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
    }
    out.generated = [...program.getSemanticDiagnostics(program.getSourceFile(framesPath))].map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

t.test('when TypeScript compiles the examples of asyncapi.yaml with the generated types, then each is taken, and frames the document refuses are not', async (t) => {
  const header = `import type { components, channels, DeviceFrameToClient, DeviceFrameToService, PushMessage } from ${JSON.stringify(framesPath.replace(/\.d\.ts$/, '.js'))};\n`;
  const lines: string[] = [];
  for (const [id, message] of Object.entries(asyncapi.components.messages as Json)) {
    for (const [i, example] of ((message as Json).examples as Json[]).entries()) {
      lines.push(`export const ${id}${i}: components["messages"][${JSON.stringify(id)}] = ${JSON.stringify(example.payload)};`);
    }
  }
  const push = (asyncapi.components.messages.push.examples as Json[]).find((e) => e.name === 'closed')!.payload as Json;
  const deleted = { ...push, event: { ...push.event, attributes: { ...push.event.attributes, incidentDeleted: true } } };
  const good = [
    header,
    ...lines,
    `export const deleted: PushMessage = ${JSON.stringify(deleted)};`,
    `export const inbound: DeviceFrameToClient[] = [push0, error0, responseResult0];`,
    `export const outbound: DeviceFrameToService[] = [ack0, response0];`,
    `export const address: channels["device"]["address"] = "/api/socket/device";`,
    // the union narrows by `type`, as a client's switch does
    `export function handle(f: DeviceFrameToClient): string { switch (f.type) { case "push": return f.incident.status + f.event.attributes.callsign; case "responseResult": return String(f.accepted); case "error": return f.message; } }`,
  ].join('\n');
  const bad: Record<string, string> = {
    deletedAsString: `${header}export const x: PushMessage = ${JSON.stringify({ ...deleted, event: { ...deleted.event, attributes: { ...deleted.event.attributes, incidentDeleted: 'true' } } })};`,
    pushIdAsString: `${header}export const x: components["messages"]["ack"] = { type: "ack", pushId: "5" };`,
    ackToClient: `${header}export const x: DeviceFrameToClient = { type: "ack", pushId: 5 };`,
    pushToService: `${header}export const x: DeviceFrameToService = ${JSON.stringify(push)};`,
    acceptedAsString: `${header}export const x: components["messages"]["responseResult"] = { type: "responseResult", responseId: "r", accepted: "true" };`,
    unknownStatus: `${header}export const x: components["messages"]["response"] = { type: "response", responseId: "r", incidentId: 7, status: "ARRIVED" };`,
    userTakesNothing: `${header}export const x: channels["user"]["toService"] = { events: [] };`,
  };
  const errors = compile({ good, ...bad });
  t.same(errors.generated, [], 'generated/frames.d.ts itself compiles');
  t.same(errors.good, [], `${lines.length} examples and the narrowing compile`);
  t.ok(lines.length >= 8, `${lines.length} examples`);
  for (const name of Object.keys(bad)) t.ok(errors[name]!.length > 0, `${name} is refused: ${errors[name]![0] ?? 'no error'}`);
});

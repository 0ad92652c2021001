// The pure pieces of input checking: the JSON depth scan, arrays refused before their items
// are walked, lone surrogates, request ids, and the cap on listed errors.
import t from 'tap';
import { boundArrays, illFormedString, MAX_JSON_DEPTH, nestsDeeperThan, requestId, validatorCompiler } from '../../../src/http/validation.js';
import { fieldErrors, MAX_LISTED_ERRORS } from '../../../src/http/errors.js';

const compile = (schema: object, httpPart = 'body') =>
  validatorCompiler()({ schema, httpPart, url: '/t', method: 'POST' } as never) as unknown as ((d: unknown) => boolean) & { errors: { keyword: string; instancePath: string }[] | null };

t.test('when JSON text nests objects and arrays, then only levels outside strings count', async (t) => {
  t.equal(nestsDeeperThan('1', 0), false);
  t.equal(nestsDeeperThan('{}', 0), true);
  t.equal(nestsDeeperThan('[[1],[2]]', 2), false);
  t.equal(nestsDeeperThan('[[[1]]]', 2), true);
  t.equal(nestsDeeperThan('{"a":"[[[[{{{{"}', 1), false, 'brackets in a string');
  t.equal(nestsDeeperThan('{"a\\"[[[":"\\\\"}', 1), false, 'an escaped quote does not end a string; an escaped backslash does not escape the quote');
  t.equal(nestsDeeperThan('["\\\\",[[1]]]', 2), true, 'after a string ending in an escaped backslash, brackets count again');
  t.equal(nestsDeeperThan('["unterminated [[[[', 1), false, 'an unterminated string is left to the parser');
  t.equal(nestsDeeperThan('{"a":'.repeat(MAX_JSON_DEPTH) + '1' + '}'.repeat(MAX_JSON_DEPTH), MAX_JSON_DEPTH), false);
  t.equal(nestsDeeperThan('['.repeat(100_000), MAX_JSON_DEPTH), true);
});

t.test('when an array is over its maxItems, then Ajv reports that once and does not check its 170 000 items', async (t) => {
  const schema = { type: 'object', properties: { resources: { type: ['array', 'null'], maxItems: 500, items: { type: 'string', minLength: 1 } } } };
  const validate = compile(schema);
  t.equal(validate({ resources: new Array(170_000).fill(7) }), false);
  t.same(validate.errors!.map((e) => e.keyword), ['maxItems']);
  t.equal(validate({ resources: [1, 'a', 2] }), false, 'within the bound, the items are checked');
  t.same(validate.errors!.map((e) => `${e.keyword} ${e.instancePath}`), ['type /resources/0', 'type /resources/2', 'if /resources']);
  t.equal(validate({ resources: null }), true, 'null is still allowed');
  t.equal(validate({ resources: ['a'] }), true);
  t.same(boundArrays({ enum: [{ maxItems: 1, items: {} }] }), { enum: [{ maxItems: 1, items: {} }] }, 'values in enum are data, not schemas');
});

t.test('when a path or query integer is not decimal digits, then it is refused before Ajv coerces it', async (t) => {
  const validate = compile({ type: 'object', properties: { id: { type: 'integer', minimum: 1 }, name: { type: 'string' } } }, 'params');
  for (const id of ['0x10', '1e3', ' 16', '16 ', '+16', '16.0', '']) {
    t.equal(validate({ id }), false, JSON.stringify(id));
    t.same(validate.errors!.map((e) => e.instancePath), ['/id']);
  }
  const ok = { id: '016', name: '0x10' };
  t.equal(validate(ok), true, 'decimal digits; a string parameter is not checked');
  t.equal(ok.id as unknown, 16, 'and then coerced');
  t.equal(validate({ id: '-1' }), false, 'a sign is left to the range check');
  t.equal(validate.errors![0]!.keyword, 'minimum');
});

t.test('when a parsed body holds a lone surrogate, then its path is named', async (t) => {
  t.equal(illFormedString({ a: ['ok', 'fine \u{1F691}'], b: 1, c: null }, '/body'), null);
  t.same(illFormedString({ a: ['ok', 'x\ud800'] }, '/body'), { path: '/body/a/1', message: 'is not well-formed Unicode (a lone surrogate)' });
  t.same(illFormedString({ 'a/b': { '\udc00': 1 } }, '/body'), { path: '/body/a~1b', message: 'has a property name that is not well-formed Unicode (a lone surrogate)' });
  t.same(illFormedString('\ud83d', '/body'), { path: '/body', message: 'is not well-formed Unicode (a lone surrogate)' });
});

t.test('when a caller sends X-Request-Id, then it is taken only if it is 1 to 64 safe characters', async (t) => {
  t.equal(requestId({ headers: { 'x-request-id': 'Abc-1.2_3:4' } }), 'Abc-1.2_3:4');
  t.equal(requestId({ headers: { 'x-request-id': 'a'.repeat(64) } }), 'a'.repeat(64));
  for (const sent of ['a'.repeat(65), 'a b', 'a\nb', 'a%20', '', ['a', 'b']]) {
    t.match(requestId({ headers: { 'x-request-id': sent } }), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, JSON.stringify(sent));
  }
  t.not(requestId({ headers: {} }), requestId({ headers: {} }), 'a fresh one each time');
});

t.test('when Ajv reports many errors, then at most MAX_LISTED_ERRORS are listed, without duplicates', async (t) => {
  const errors = Array.from({ length: 100_000 }, (_, i) => ({ instancePath: `/k${i}`, keyword: 'type', message: 'must be string' }));
  const { listed, more } = fieldErrors('body', errors);
  t.equal(listed.length, MAX_LISTED_ERRORS);
  t.equal(MAX_LISTED_ERRORS, 20);
  t.equal(more, true);
  const few = fieldErrors('body', [errors[0]!, errors[0]!, { instancePath: '/r', keyword: 'if', message: 'must match "then" schema' }]);
  t.same(few, { listed: [{ path: '/body/k0', message: 'must be string' }], more: false });
});

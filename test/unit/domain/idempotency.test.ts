// The Idempotency-Key's syntax (an RFC 8941 sf-string, as the IETF httpapi draft says) and the
// canonical body a request's fingerprint is made of (domain/idempotency.ts).
import t from 'tap';
import { canonicalJson, IDEMPOTENCY_KEY_MAX, keepsAnswer, keyStripeCaps, parseIdempotencyKey, preconditionIdentity, requestIdentity, roomForKey, storedKeyAnswers } from '../../../src/domain/idempotency.js';

t.test('when the key is an sf-string, then its content is the key, escapes undone', async (t) => {
  t.same(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'), { ok: true, key: '8e03978e-40d5-43e8-bc93-6894a57f9324' });
  t.same(parseIdempotencyKey(' "a b" '), { ok: true, key: 'a b' }, 'spaces inside a string are content; around it, not');
  t.same(parseIdempotencyKey('"a\\"b\\\\c"'), { ok: true, key: 'a"b\\c' });
  t.same(parseIdempotencyKey(`"${'k'.repeat(IDEMPOTENCY_KEY_MAX)}"`), { ok: true, key: 'k'.repeat(IDEMPOTENCY_KEY_MAX) });
});

t.test('when the key is bare visible ASCII, then it is taken as its own content (the same key as quoted)', async (t) => {
  t.same(parseIdempotencyKey('abc-123'), { ok: true, key: 'abc-123' });
  t.same(parseIdempotencyKey('abc-123'), parseIdempotencyKey('"abc-123"'));
});

t.test('when the key is malformed, then it is refused with the reason', async (t) => {
  const bad: [string, RegExp][] = [
    ['', /empty/],
    ['""', /empty/],
    ['   ', /empty/],
    [`"${'k'.repeat(IDEMPOTENCY_KEY_MAX + 1)}"`, /at most 255/],
    ['k'.repeat(IDEMPOTENCY_KEY_MAX + 1), /at most 255/],
    ['"abc', /closing quote/],
    ['"a\\nb"', /escape/],
    ['"é"', /printable ASCII/],
    ['"a\tb"', /printable ASCII/],
    ['ключ', /printable ASCII/],
    ['a b', /printable ASCII/],
    ['"a", "b"', /one sf-string/],
    ['a, b', /printable ASCII|one sf-string/],
    ['a,b', /one sf-string/],
    ['x2, x3', /one sf-string/],
    ['"a"x', /one sf-string/],
    ['a"b', /one sf-string/],
  ];
  for (const [header, why] of bad) {
    const r = parseIdempotencyKey(header);
    t.equal(r.ok, false, JSON.stringify(header));
    if (!r.ok) t.match(r.why, why, JSON.stringify(header));
  }
});

t.test('when two bodies differ only in key order or spacing, then their canonical JSON is the same; any value, array order or method/path/If-Match makes it differ', async (t) => {
  const a = canonicalJson(JSON.parse('{"b": 1, "a": {"y": [1, 2], "x": null}}'));
  const b = canonicalJson(JSON.parse('{"a":{"x":null,"y":[1,2]},"b":1.0}'));
  t.equal(a, b);
  t.equal(a, '{"a":{"x":null,"y":[1,2]},"b":1}');
  t.not(canonicalJson({ r: [1, 2] }), canonicalJson({ r: [2, 1] }), 'array order counts');
  t.not(canonicalJson({ d: 'x' }), canonicalJson({ d: 'x ' }));
  t.equal(canonicalJson({ a: undefined, b: 1 }), '{"b":1}', 'undefined members are left out, as JSON does');
  t.equal(canonicalJson([undefined, 1]), '[null,1]', 'and an undefined array entry is null, as JSON has it');
  t.equal(canonicalJson(undefined), 'null');
  t.equal(
    canonicalJson(JSON.parse('{"r": [{"b": 1, "a": 2}], "10": 1, "9": 2}')),
    canonicalJson(JSON.parse('{"9": 2, "10": 1, "r": [{"a": 2, "b": 1}]}')),
    'objects inside arrays are sorted too; integer-like keys come in one order whatever order they came in',
  );
  t.equal(canonicalJson(JSON.parse('{"b": 1, "__proto__": {"x": 1}}')), '{"__proto__":{"x":1},"b":1}', 'a member named __proto__ is a member');
  const req = { method: 'PUT', path: '/api/incidents/1', ifMatch: null, body: { a: 1 } };
  t.not(requestIdentity(req), requestIdentity({ ...req, method: 'POST' }));
  t.not(requestIdentity(req), requestIdentity({ ...req, path: '/api/incidents/2' }));
  t.not(requestIdentity(req), requestIdentity({ ...req, ifMatch: '"1-1"' }));
  t.equal(requestIdentity({ ...req, body: undefined }), 'PUT\n/api/incidents/1\n\n', 'a DELETE has no body');
});

t.test('when two If-Match headers name the same tags of ours, then they are one precondition; another list, `*`, none or only foreign tags are others', async (t) => {
  const tags = (...v: [number, number][]) => v.map(([id, version]) => ({ id, version }));
  t.equal(preconditionIdentity(tags([12, 3]), '"12-3"'), '"12-3"', 'one tag: the header as an ETag gives it');
  t.equal(preconditionIdentity(tags([12, 3], [12, 4]), '"12-3", "12-4"'), preconditionIdentity(tags([12, 4], [12, 3], [12, 4]), '"12-4","12-3","12-4"'));
  t.not(preconditionIdentity(tags([12, 3]), '"12-3"'), preconditionIdentity(tags([12, 3], [12, 4]), '"12-3", "12-4"'));
  t.equal(preconditionIdentity('*', '*'), '*');
  t.equal(preconditionIdentity(null, undefined), null);
  t.equal(preconditionIdentity([], ' W/"12-3" '), 'W/"12-3"', 'no tag of ours: as sent (it always fails)');
  t.not(preconditionIdentity([], 'W/"12-3"'), preconditionIdentity(null, undefined), 'and never the same as no If-Match');
});

t.test('when the key bound is shared out over stripes, then the shares add up to it and differ by at most one (issue 36)', async (t) => {
  for (const [max, stripes] of [[20, 16], [500_000, 16], [3, 16], [1, 1], [7, 3]] as const) {
    const caps = keyStripeCaps(max, stripes);
    t.equal(caps.length, stripes);
    t.equal(caps.reduce((a, b) => a + b, 0), max, `${max} over ${stripes}`);
    t.ok(Math.max(...caps) - Math.min(...caps) <= 1);
  }
  t.ok(roomForKey(19, 20));
  t.notOk(roomForKey(20, 20));
  t.ok(keepsAnswer({ ok: true }));
  t.notOk(keepsAnswer({ ok: false }), 'a refusal keeps no key');
});

t.test('when a kept key meets a request, then only the same request (its fingerprint) gets the stored answer; another is refused as a reused key', async (t) => {
  t.ok(storedKeyAnswers('f1', 'f1'));
  t.notOk(storedKeyAnswers('f1', 'f2'));
});

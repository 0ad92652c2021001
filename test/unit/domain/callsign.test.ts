import t from 'tap';
import { callsignKey, diffCallsigns, normaliseCallsigns } from '../../../src/domain/callsign.js';

t.test('when keys are computed, then trim, NFC and case are ignored and nothing else', async (t) => {
  t.equal(callsignKey('  E1 '), 'e1');
  t.equal(callsignKey('A\u0308-1'), callsignKey('\u00c4-1'), 'NFD and NFC spellings are one callsign');
  t.equal(callsignKey('ÄRZTE'), 'ärzte');
  t.not(callsignKey('E_1'), callsignKey('E%1'), 'pattern characters are literal');
  t.equal(callsignKey("E1'; DROP TABLE devices; --"), "e1'; drop table devices; --");
});

t.test('when a key is asked for again, after many other keys or for a long string, then it is the same key', async (t) => {
  const spellings = (i: number) => [` E${i} `, `e${i}`, `A\u0308${i}`, `\u00c4${i}`];
  const first = new Map<string, string>();
  // more distinct strings than the keys kept, so some are computed again after being dropped
  for (let i = 0; i < 6_000; i++) for (const s of spellings(i)) first.set(s, callsignKey(s));
  let differing = 0;
  for (let i = 0; i < 6_000; i++) for (const s of spellings(i)) if (callsignKey(s) !== first.get(s)) differing++;
  t.equal(differing, 0, 'every key computed a second time is the first one');
  t.equal(first.get(' E5999 '), 'e5999');
  t.equal(first.get('A\u03085999'), first.get('\u00c45999'), 'NFD and NFC, however late');
  const long = ` ${'AB'.repeat(200)} `;
  t.equal(callsignKey(long), 'ab'.repeat(200), 'a string longer than any callsign is keyed (not kept)');
  t.equal(callsignKey(long), 'ab'.repeat(200));
});

t.test('when callsigns are normalised, then they are trimmed, de-duplicated by key (first spelling) and ordered', async (t) => {
  t.same(normaliseCallsigns([' E1', 'a7', 'e1 ', 'A7', 'Z9']), { ok: true, callsigns: ['E1', 'a7', 'Z9'] });
  t.same(normaliseCallsigns(null), { ok: true, callsigns: [] });
  t.same(normaliseCallsigns(undefined), { ok: true, callsigns: [] });
});

t.test('when a callsign is blank or longer than 64 characters, then it is refused with its index', async (t) => {
  t.same(normaliseCallsigns(['E1', '   ']), { ok: false, error: { code: 'INVALID_CALLSIGN', index: 1, reason: 'empty' } });
  t.same(normaliseCallsigns(['x'.repeat(65)]), { ok: false, error: { code: 'INVALID_CALLSIGN', index: 0, reason: 'too-long' } });
  t.same(normaliseCallsigns([` ${'x'.repeat(64)} `]), { ok: true, callsigns: ['x'.repeat(64)] }, '64 after trimming is fine');
  t.same(normaliseCallsigns(['🚒'.repeat(64)]).ok, true, 'length counts code points, not UTF-16 units');
  t.same(normaliseCallsigns(['A\u0308'.repeat(64)]).ok, true, 'length counts the NFC form: 64 decomposed Ä are 64');
  t.same(normaliseCallsigns(['A\u0308'.repeat(65)]).ok, false, '65 decomposed Ä are too long');
  // U+FB2C has no composed form: NFC spells it with 3 code points, the most any character takes
  t.same(normaliseCallsigns(['\uFB2C'.repeat(21)]).ok, true, '21 characters that NFC spells with 63 are fine');
  t.same(normaliseCallsigns(['\uFB2C'.repeat(22)]), { ok: false, error: { code: 'INVALID_CALLSIGN', index: 0, reason: 'too-long' } }, '22 of them (66 in NFC) are too long');
});

t.test('when lists are diffed, then by key, with the new spelling for added/unchanged and the old for removed', async (t) => {
  t.same(diffCallsigns(['E1', 'A7'], ['a7', 'Z9']), { added: ['Z9'], removed: ['E1'], unchanged: ['a7'] });
  t.same(diffCallsigns([], ['E1']), { added: ['E1'], removed: [], unchanged: [] });
  t.same(diffCallsigns(['E1'], []), { added: [], removed: ['E1'], unchanged: [] });
});

import t from 'tap';
import { callsignKey, diffCallsigns, normaliseCallsigns } from '../../../src/domain/callsign.js';

t.test('when keys are computed, then trim, NFC and case are ignored and nothing else', async (t) => {
  t.equal(callsignKey('  E1 '), 'e1');
  t.equal(callsignKey('A\u0308-1'), callsignKey('\u00c4-1'), 'NFD and NFC spellings are one callsign');
  t.equal(callsignKey('ÄRZTE'), 'ärzte');
  t.not(callsignKey('E_1'), callsignKey('E%1'), 'pattern characters are literal');
  t.equal(callsignKey("E1'; DROP TABLE devices; --"), "e1'; drop table devices; --");
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
});

t.test('when lists are diffed, then by key, with the new spelling for added/unchanged and the old for removed', async (t) => {
  t.same(diffCallsigns(['E1', 'A7'], ['a7', 'Z9']), { added: ['Z9'], removed: ['E1'], unchanged: ['a7'] });
  t.same(diffCallsigns([], ['E1']), { added: ['E1'], removed: [], unchanged: [] });
  t.same(diffCallsigns(['E1'], []), { added: [], removed: ['E1'], unchanged: [] });
});

// requireWritable (services/writable.ts): the readonly rule every writing service asks.
import t from 'tap';
import { requireWritable } from '../../../src/services/writable.js';
import { Refused } from '../../../src/domain/refusal.js';
import type { Principal } from '../../../src/services/authenticator.js';

const caller = (readonly: boolean) => ({ user: { readonly }, method: 'basic', token: null, session: null }) as unknown as Principal;

t.test('when the caller is readonly, then it is refused with READONLY (403)', async (t) => {
  const err = (() => {
    try {
      requireWritable(caller(true));
    } catch (e) {
      return e;
    }
  })();
  t.ok(err instanceof Refused, 'a refusal, not a bug');
  t.equal((err as Refused).code, 'READONLY');
});

t.test('when the caller is not readonly, then nothing is refused', async (t) => {
  t.doesNotThrow(() => requireWritable(caller(false)));
});

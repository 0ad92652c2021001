import t from 'tap';
import { instant, iso, utc } from '../../../src/domain/time.js';

t.test('instant reads RFC 3339 with any offset as a UTC millisecond', async (t) => {
  t.equal(instant('2026-11-23T10:00:00+02:00'), Date.UTC(2026, 10, 23, 8, 0, 0));
  t.equal(instant('2026-11-23t08:00:00.123456z'), Date.UTC(2026, 10, 23, 8, 0, 0, 123), 'lower case, more than 3 fraction digits');
});

t.test('a leap second is the last millisecond before it, not a refusal', async (t) => {
  t.equal(utc('2016-12-31T23:59:60Z'), '2016-12-31T23:59:59.999Z');
  t.equal(utc('2016-12-31T22:59:60.5-01:00'), '2016-12-31T23:59:59.999Z');
});

t.test('an instant outside UTC years 0000-9999 has no representation', async (t) => {
  t.equal(instant('0000-01-01T00:00:00+01:00'), null, 'falls into year -1');
  t.equal(instant('9999-12-31T23:59:59-01:00'), null, 'falls into year 10000');
  t.equal(utc('0000-01-01T00:00:00Z'), '0000-01-01T00:00:00.000Z');
  t.equal(utc('9999-12-31T23:59:59.999Z'), '9999-12-31T23:59:59.999Z');
  t.throws(() => utc('9999-12-31T23:59:59-01:00'), RangeError);
  t.equal(utc(null), null);
  t.equal(utc(undefined), null);
});

t.test('an instant is written as UTC with milliseconds', async (t) => {
  t.equal(iso(new Date(Date.UTC(2026, 10, 25, 8, 0, 0, 7))), '2026-11-25T08:00:00.007Z');
});

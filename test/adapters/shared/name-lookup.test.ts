// Host-name lookups (src/adapters/shared/name-lookup.ts) against a DNS stub on 127.0.0.1: the
// answer of A and AAAA together, the deadline of a server that never answers, the bound on
// lookups under way, cancelling a lookup (AbortSignal), and the names answered without DNS (IP literals, localhost).
import t from 'tap';
import { LookupBusy, LookupCancelled, NameLookup } from '../../../src/adapters/shared/name-lookup.js';
import { dnsStub } from '../../fixtures/dns-stub.js';

t.test('when a name has A and AAAA records, then both are answered, IPv4 first; a name with none answers []', async (t) => {
  const dns = await dnsStub(t, { 'cad.example.test': { a: ['93.184.216.34'], aaaa: ['2606:2800:220:1::1'] } });
  const names = new NameLookup({ servers: [dns.server], timeoutMs: 5000 });
  t.same(await names.resolve('cad.example.test'), [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1::1', family: 6 },
  ]);
  t.same(await names.resolve('nowhere.example.test'), []);
  t.ok(dns.asked.includes('cad.example.test'), 'asked the stub');
});

t.test('when the server never answers, then the lookup ends by its deadline with [] and frees its place', async (t) => {
  const dns = await dnsStub(t, { 'slow.example.test': 'silent' });
  const names = new NameLookup({ servers: [dns.server], timeoutMs: 300, maxInFlight: 1 });
  const pending = names.resolve('slow.example.test');
  t.equal(names.running, 1);
  await t.rejects(names.resolve('slow.example.test'), LookupBusy, 'a second is refused at once while one is under way');
  t.same(await pending, []);
  t.equal(names.running, 0);
  t.same(await names.resolve('slow.example.test'), [], 'the place is free again');
});

t.test('when a lookup’s signal aborts, then it rejects LookupCancelled long before its deadline and its place is free at once', async (t) => {
  const dns = await dnsStub(t, { 'slow.example.test': 'silent', 'cad.example.test': { a: ['93.184.216.34'] } });
  const names = new NameLookup({ servers: [dns.server], timeoutMs: 20_000, maxInFlight: 1 });
  const cancel = new AbortController();
  const started = Date.now();
  const pending = names.resolve('slow.example.test', cancel.signal);
  const rejected = t.rejects(pending, LookupCancelled);
  t.equal(names.running, 1);
  cancel.abort();
  t.equal(names.running, 0, 'freed when aborted');
  t.same(await names.resolve('cad.example.test'), [{ address: '93.184.216.34', family: 4 }], 'another takes the place');
  await rejected;
  t.ok(Date.now() - started < 5000, 'ended well before its 20 s deadline');
  await t.rejects(names.resolve('cad.example.test', cancel.signal), LookupCancelled, 'an aborted signal starts nothing');
  const kept = new AbortController();
  t.same(await names.resolve('cad.example.test', kept.signal), [{ address: '93.184.216.34', family: 4 }], 'a signal never aborted changes nothing');
  kept.abort();
  t.equal(names.running, 0, 'aborting after the answer frees nothing twice');
});

t.test('when the name is an IP literal, localhost or under .localhost, then no DNS is asked', async (t) => {
  const dns = await dnsStub(t, {});
  const names = new NameLookup({ servers: [dns.server], maxInFlight: 0 });
  t.same(await names.resolve('203.0.113.9'), [{ address: '203.0.113.9', family: 4 }]);
  t.same(await names.resolve('[::1]'), [{ address: '::1', family: 6 }]);
  for (const host of ['localhost', 'LocalHost.', 'cad.localhost']) {
    t.same(await names.resolve(host), [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ], host);
  }
  t.same(dns.asked, []);
});

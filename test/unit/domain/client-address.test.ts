// The key the per-address limits count a client under (src/domain/client-address.ts): IPv4 as
// it is, IPv6 by its /64, an IPv4-mapped IPv6 address as its IPv4 address.
import t from 'tap';
import { addressKey } from '../../../src/domain/client-address.js';

t.test('when the address is IPv4, or no address at all, then it is its own key', async (t) => {
  t.equal(addressKey('10.0.0.1'), '10.0.0.1');
  t.not(addressKey('10.0.0.1'), addressKey('10.0.0.2'), 'each IPv4 address is a client of its own');
  t.equal(addressKey('unknown'), 'unknown');
  t.equal(addressKey(''), '');
});

t.test('when two IPv6 addresses share their first 64 bits, then they have one key, however they are written', async (t) => {
  const key = addressKey('2001:db8:0:1::1');
  t.equal(key, '2001:db8:0:1::/64');
  for (const a of ['2001:db8:0:1:ffff:ffff:ffff:ffff', '2001:0DB8:0000:0001:0:0:0:2', '2001:db8::1:0:0:0:3', '2001:db8:0:1::abcd%eth0', '2001:db8:0:1::10.0.0.1']) {
    t.equal(addressKey(a), key, a);
  }
  t.not(addressKey('2001:db8:0:2::1'), key, 'the next /64 is another client');
  t.equal(addressKey('::1'), '0:0:0:0::/64', 'loopback');
  t.equal(addressKey('::'), '0:0:0:0::/64', 'unspecified');
  t.equal(addressKey('fe80::1'), 'fe80:0:0:0::/64');
});

t.test('when an IPv6 address maps an IPv4 address, then its key is the IPv4 address (a dual-stack socket reports IPv4 clients so)', async (t) => {
  t.equal(addressKey('::ffff:10.0.0.1'), '10.0.0.1');
  t.equal(addressKey('::FFFF:10.0.0.1'), '10.0.0.1');
  t.equal(addressKey('::ffff:a00:2'), '10.0.0.2', 'written in hex');
  t.equal(addressKey('0:0:0:0:0:ffff:7f00:1'), '127.0.0.1', 'written in full');
  t.not(addressKey('::ffff:10.0.0.1'), addressKey('::ffff:10.0.0.2'), 'two mapped addresses are two clients, not one /64');
  t.equal(addressKey('::fffe:10.0.0.1'), '0:0:0:0::/64', 'not the mapped prefix: an IPv6 /64 like any other');
  t.equal(addressKey('1::ffff:10.0.0.1'), '1:0:0:0::/64');
});

t.test('when a text with a colon is not an IPv6 address, then it is its own key', async (t) => {
  for (const text of ['1::2::3', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7', 'g::1', '12345::1', ':::', '1.2.3.4::', '::1.2.3.256', '::1.2.3', '1:2:3:4:5:6:7::8', '1:2:3:4:5:6:1.2.3.4:8']) {
    t.equal(addressKey(text), text, text);
  }
  t.equal(addressKey('1:2:3:4:5:6:1.2.3.4'), '1:2:3:4::/64', 'a dotted quad as the last two groups');
});

import { expect } from 'chai';
import { parseTrustedProxies, rateLimitClientKey, resolveClientIp } from '../../src/lib/client-ip';

describe('client address behind proxies', () => {
  const trusted = parseTrustedProxies(['10.0.0.0/8', '192.168.1.7', 'fd00::/8']);
  const none = parseTrustedProxies([]);

  const cases: Array<[string, string | undefined, string | undefined, string]> = [
    ['no trusted proxies: the header is ignored', undefined, '203.0.113.9', '198.51.100.1'],
    ['an untrusted peer cannot speak for anyone', 'trusted', '203.0.113.9', '198.51.100.1'],
    ['a trusted peer vouches for the last hop', 'trusted', '203.0.113.9', '10.1.2.3'],
    ['trusted hops are skipped from the right; spoofed left-most entries are not reached', 'trusted', '1.1.1.1, 203.0.113.9, 10.0.0.5', '10.1.2.3'],
    ['IPv4-mapped peers count as IPv4', 'trusted', '203.0.113.9', '::ffff:192.168.1.7'],
    ['IPv6 proxies', 'trusted', '2001:db8::1', 'fd00::2'],
    ['garbage hops are ignored', 'trusted', 'not-an-ip, 203.0.113.9', '10.1.2.3'],
    ['all hops trusted: the left-most one', 'trusted', '10.0.0.9, 10.0.0.8', '10.1.2.3'],
    ['a trusted peer without the header is the client', 'trusted', undefined, '10.1.2.3'],
  ];
  const expected = ['198.51.100.1', '198.51.100.1', '203.0.113.9', '203.0.113.9', '203.0.113.9', '2001:db8::1', '203.0.113.9', '10.0.0.9', '10.1.2.3'];

  cases.forEach(([name, which, header, peer], i) => {
    it(name, () => {
      expect(resolveClientIp(which === 'trusted' ? trusted : none, peer, header)).to.equal(expected[i]);
    });
  });

  it('refuses entries that are not addresses or CIDRs', () => {
    for (const bad of [['10.0.0.0/33'], ['example.com'], ['10.0.0.0/x'], ['::1/129']]) {
      expect(() => parseTrustedProxies(bad), bad[0]).to.throw();
    }
  });
});

describe('rate-limit client key', () => {
  const cases: Array<[string, string]> = [
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['2001:db8:1:2::5', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ];
  for (const [ip, key] of cases) it(`${ip} → ${key}`, () => expect(rateLimitClientKey(ip)).to.equal(key));
});

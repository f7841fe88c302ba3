import { expect } from 'chai';
import { isForbiddenAddress } from '../../src/lib/net-policy';

type Verdict = 'always' | 'private' | 'public';

const CASES: Array<[string, Verdict]> = [
  // link-local and cloud metadata
  ['169.254.169.254', 'always'],
  ['169.254.0.1', 'always'],
  ['fe80::1', 'always'],
  ['fe80::1%eth0', 'always'],
  ['febf:ffff::1', 'always'],
  ['fd00:ec2::254', 'always'],
  // unspecified, multicast, broadcast, reserved
  ['0.0.0.0', 'always'],
  ['0.1.2.3', 'always'],
  ['::', 'always'],
  ['224.0.0.1', 'always'],
  ['239.255.255.250', 'always'],
  ['ff02::1', 'always'],
  ['255.255.255.255', 'always'],
  ['240.0.0.1', 'always'],
  // IPv4-mapped IPv6 takes the IPv4 address's verdict, in every spelling
  ['::ffff:169.254.169.254', 'always'],
  ['::ffff:a9fe:a9fe', 'always'],
  ['0:0:0:0:0:ffff:a9fe:a9fe', 'always'],
  ['::ffff:0.0.0.0', 'always'],
  ['::ffff:127.0.0.1', 'private'],
  ['::ffff:7f00:1', 'private'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:8.8.8.8', 'public'],
  // loopback and private ranges, with their edges
  ['127.0.0.1', 'private'],
  ['127.255.255.254', 'private'],
  ['::1', 'private'],
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['100.64.0.1', 'private'],
  ['100.127.255.255', 'private'],
  ['fc00::1', 'private'],
  ['fd12:3456::1', 'private'],
  // public, including the neighbours of private ranges
  ['8.8.8.8', 'public'],
  ['1.1.1.1', 'public'],
  ['172.15.255.255', 'public'],
  ['172.32.0.0', 'public'],
  ['100.63.255.255', 'public'],
  ['100.128.0.0', 'public'],
  ['169.255.0.1', 'public'],
  ['11.0.0.1', 'public'],
  ['223.255.255.255', 'public'],
  ['2606:4700:4700::1111', 'public'],
  ['2a00:1450:4001:81c::200e', 'public'],
  // every special-purpose IPv4 range that is not globally reachable, with its edges
  ['192.0.0.0', 'always'],
  ['192.0.0.255', 'always'],
  ['192.0.1.0', 'public'],
  ['192.0.2.1', 'always'],
  ['192.0.2.255', 'always'],
  ['192.0.3.0', 'public'],
  ['192.88.99.1', 'always'],
  ['198.17.255.255', 'public'],
  ['198.18.0.0', 'always'],
  ['198.19.255.255', 'always'],
  ['198.20.0.0', 'public'],
  ['198.51.100.7', 'always'],
  ['198.51.101.0', 'public'],
  ['203.0.113.9', 'always'],
  ['203.0.114.0', 'public'],
  // every special-purpose IPv6 range that is not globally reachable
  ['2001:db8::1', 'always'],
  ['2001:db8::ffff:7f00:1', 'always'],
  ['2001:2::1', 'always'], // benchmarking, inside the IETF protocol assignments 2001::/23
  ['2001:10::1', 'always'], // deprecated ORCHID
  ['2001:1ff::1', 'always'],
  ['2001:200::1', 'public'],
  ['100::1', 'always'], // discard-only
  ['100::ffff:ffff:ffff:ffff', 'always'],
  ['100:0:0:1::1', 'always'], // dummy prefix
  ['3fff::1', 'always'], // documentation
  ['5f00::1', 'always'], // SRv6 SIDs
  ['fec0::1', 'always'], // deprecated site-local
  ['64:ff9b:1::1', 'always'], // local-use translation
  // outside global unicast 2000::/3 and every range above: unassigned
  ['fe00::1', 'always'],
  ['4000::1', 'always'],
  ['8000::1', 'always'],
  // NAT64 64:ff9b::/96 takes the embedded IPv4 address's verdict, in either spelling
  ['64:ff9b::a9fe:a9fe', 'always'],
  ['64:ff9b::169.254.169.254', 'always'],
  ['64:ff9b::7f00:1', 'private'],
  ['64:ff9b::10.0.0.1', 'private'],
  ['64:ff9b::c612:1', 'always'], // 198.18.0.1
  ['64:ff9b::808:808', 'public'],
  // 6to4 2002::/16 embeds the IPv4 address in its second and third groups
  ['2002:a9fe:a9fe::1', 'always'],
  ['2002:7f00:1::', 'private'],
  ['2002:c0a8:101::1', 'private'],
  ['2002:c000:201::1', 'always'], // 192.0.2.1
  ['2002:808:808::1', 'public'],
  // Teredo 2001::/32 carries the client address inverted in its last 32 bits
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'private'], // client 127.0.0.1
  ['2001:0:4136:e378:8000:63bf:5601:5601', 'always'], // client 169.254.169.254
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'public'], // client 8.8.8.8
  // IPv4-compatible ::a.b.c.d and IPv4-translated ::ffff:0:a.b.c.d
  ['::2', 'always'], // 0.0.0.2
  ['::127.0.0.1', 'private'],
  ['::a9fe:a9fe', 'always'],
  ['::8.8.8.8', 'public'],
  ['::ffff:0:a9fe:a9fe', 'always'],
  ['::ffff:0:7f00:1', 'private'],
];

const NOT_ADDRESSES = ['', 'localhost', 'example.com', '127.0.0.1.nip.io', '256.1.1.1', '1.2.3', '::ffff:1.2.3', 'fe80::1::2'];

describe('isForbiddenAddress', () => {
  for (const [ip, verdict] of CASES) {
    it(`${ip}: ${verdict}`, () => {
      expect(isForbiddenAddress(ip, { allowPrivate: false }), 'allowPrivate false').to.equal(verdict !== 'public');
      expect(isForbiddenAddress(ip, { allowPrivate: true }), 'allowPrivate true').to.equal(verdict === 'always');
    });
  }

  for (const text of NOT_ADDRESSES) {
    it(`refuses ${JSON.stringify(text)}, which is not an IP address`, () => {
      expect(isForbiddenAddress(text, { allowPrivate: true })).to.equal(true);
    });
  }
});

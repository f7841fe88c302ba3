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
  ['2001:db8::ffff:7f00:1', 'public'],
  ['fe00::1', 'public'],
  ['::2', 'public'],
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

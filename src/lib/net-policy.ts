import { BlockList, isIPv4, isIPv6 } from 'node:net';

type Family = 'ipv4' | 'ipv6';

interface Ranges {
  ipv4: Array<[string, number]>;
  ipv6: Array<[string, number]>;
}

function buildBlockList(ranges: Ranges): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of ranges.ipv4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of ranges.ipv6) list.addSubnet(network, prefix, 'ipv6');
  return list;
}

/**
 * Never a legitimate outbound target, whatever the configuration: every range of the IANA IPv4 and
 * IPv6 special-purpose address registries that is not globally reachable (apart from the private
 * ones below), plus multicast. Addresses that embed an IPv4 address are judged by that address.
 */
const ALWAYS_FORBIDDEN = buildBlockList({
  ipv4: [
    ['0.0.0.0', 8], // "this network" / unspecified
    ['169.254.0.0', 16], // link-local, incl. cloud metadata 169.254.169.254
    ['192.0.0.0', 24], // IETF protocol assignments (DS-Lite, NAT64 discovery, …)
    ['192.0.2.0', 24], // documentation TEST-NET-1
    ['192.88.99.0', 24], // deprecated 6to4 relay anycast
    ['198.18.0.0', 15], // benchmarking
    ['198.51.100.0', 24], // documentation TEST-NET-2
    ['203.0.113.0', 24], // documentation TEST-NET-3
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, incl. broadcast 255.255.255.255
  ],
  ipv6: [
    ['::', 128], // unspecified
    ['64:ff9b:1::', 48], // local-use IPv4/IPv6 translation
    ['100::', 64], // discard-only
    ['100:0:0:1::', 64], // dummy prefix
    ['2001::', 23], // IETF protocol assignments (Teredo, within it, is decoded before this check)
    ['2001:db8::', 32], // documentation
    ['3fff::', 20], // documentation
    ['5f00::', 16], // segment routing SIDs
    ['fe80::', 10], // link-local
    ['fec0::', 10], // deprecated site-local
    ['fd00:ec2::254', 128], // AWS metadata over IPv6
    ['ff00::', 8], // multicast
  ],
});

/** Reachable only in tests and local development (allowPrivate). */
const PRIVATE = buildBlockList({
  ipv4: [
    ['127.0.0.0', 8],
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['100.64.0.0', 10], // CGNAT
  ],
  ipv6: [
    ['::1', 128],
    ['fc00::', 7], // unique-local
  ],
});

/** Global unicast: any other IPv6 address (that embeds no IPv4 address) is unassigned or special. */
const GLOBAL_UNICAST_V6 = buildBlockList({ ipv4: [], ipv6: [['2000::', 3]] });

/**
 * Expands a valid IPv6 address (no zone id) into its eight 16-bit groups,
 * including the dotted-quad tail form (`::ffff:1.2.3.4`).
 */
export function ipv6Groups(address: string): number[] {
  const lastColon = address.lastIndexOf(':');
  const last = address.slice(lastColon + 1);
  let text = address;
  if (isIPv4(last)) {
    const [a, b, c, d] = last.split('.').map(Number);
    text = `${address.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parseHalf = (half: string): number[] =>
    half === '' ? [] : half.split(':').map((group) => parseInt(group, 16));
  const [headText, tailText] = text.split('::');
  const head = parseHalf(headText);
  const tail = tailText === undefined ? [] : parseHalf(tailText);
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

function dotted(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/**
 * The IPv4 address an IPv6 address carries and connects to in the end: IPv4-mapped
 * (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
 * (`64:ff9b::a.b.c.d`), 6to4 (`2002:AABB:CCDD::`) and Teredo (the client address, inverted).
 */
export function embeddedIPv4(address: string): string | null {
  const g = ipv6Groups(address);
  const zeros = (from: number, to: number) => g.slice(from, to).every((group) => group === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return dotted(g[6], g[7]);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return dotted(g[6], g[7]);
  // `::` and `::1` are judged as IPv6 (unspecified, loopback), not as 0.0.0.0 and 0.0.0.1.
  if (zeros(0, 6) && (g[6] !== 0 || g[7] > 1)) return dotted(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return dotted(g[6], g[7]);
  if (g[0] === 0x2002) return dotted(g[1], g[2]);
  if (g[0] === 0x2001 && g[1] === 0) return dotted(g[6] ^ 0xffff, g[7] ^ 0xffff);
  return null;
}

function withoutZone(ip: string): string {
  const percent = ip.indexOf('%');
  return percent === -1 ? ip : ip.slice(0, percent);
}

function classify(ip: string): { address: string; family: Family } | null {
  const bare = withoutZone(ip);
  if (isIPv4(bare)) return { address: bare, family: 'ipv4' };
  if (!isIPv6(bare)) return null;
  const v4 = embeddedIPv4(bare);
  return v4 ? { address: v4, family: 'ipv4' } : { address: bare, family: 'ipv6' };
}

/**
 * Whether an outbound connection to this IP address must be refused.
 * Anything that is not a valid IP address is refused (fail closed).
 */
export function isForbiddenAddress(ip: string, opts: { allowPrivate: boolean }): boolean {
  const target = classify(ip);
  if (!target) return true;
  if (ALWAYS_FORBIDDEN.check(target.address, target.family)) return true;
  if (PRIVATE.check(target.address, target.family)) return !opts.allowPrivate;
  return target.family === 'ipv6' && !GLOBAL_UNICAST_V6.check(target.address, 'ipv6');
}

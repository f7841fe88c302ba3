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

/** Never a legitimate outbound target, whatever the configuration. */
const ALWAYS_FORBIDDEN = buildBlockList({
  ipv4: [
    ['0.0.0.0', 8], // "this network" / unspecified
    ['169.254.0.0', 16], // link-local, incl. cloud metadata 169.254.169.254
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, incl. broadcast 255.255.255.255
  ],
  ipv6: [
    ['::', 128], // unspecified
    ['fe80::', 10], // link-local
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

/**
 * Expands a valid IPv6 address (no zone id) into its eight 16-bit groups,
 * including the dotted-quad tail form (`::ffff:1.2.3.4`).
 */
function ipv6Groups(address: string): number[] {
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

/** `::ffff:a.b.c.d` (IPv4-mapped) connects to the IPv4 address a.b.c.d. */
function mappedIPv4(address: string): string | null {
  const groups = ipv6Groups(address);
  const isMapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (!isMapped) return null;
  return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
}

function withoutZone(ip: string): string {
  const percent = ip.indexOf('%');
  return percent === -1 ? ip : ip.slice(0, percent);
}

function classify(ip: string): { address: string; family: Family } | null {
  const bare = withoutZone(ip);
  if (isIPv4(bare)) return { address: bare, family: 'ipv4' };
  if (!isIPv6(bare)) return null;
  const v4 = mappedIPv4(bare);
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
  return !opts.allowPrivate && PRIVATE.check(target.address, target.family);
}

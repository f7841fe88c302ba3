import { BlockList, isIP } from 'node:net';
import { ipv6Groups } from './net-policy';

function normalize(address: string): string {
  const trimmed = address.trim();
  return trimmed.startsWith('::ffff:') && isIP(trimmed.slice(7)) === 4 ? trimmed.slice(7) : trimmed;
}

/** Parses `10.0.0.0/8, 192.168.1.7, fd00::/8` into a block list; throws on an entry that is not an address or a CIDR. */
export function parseTrustedProxies(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.trim().split('/');
    const family = isIP(address);
    if (!family) throw new Error(`not an IP address or CIDR: ${entry}`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) list.addAddress(address, type);
    else {
      const prefix = Number(bits);
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`bad prefix length: ${entry}`);
      list.addSubnet(address, prefix, type);
    }
  }
  return list;
}

function isTrusted(list: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The client's address. `X-Forwarded-For` is believed only as far as trusted proxies vouch for it:
 * walking from the connection's peer backwards, the first address that is not a trusted proxy is
 * the client. With no trusted proxies the peer address is the answer, whatever the header says.
 */
export function resolveClientIp(trusted: BlockList, peerAddress: string | undefined, forwardedFor: string | undefined): string {
  let client = normalize(peerAddress ?? 'unknown');
  if (!forwardedFor || !isTrusted(trusted, client)) return client;
  const hops = forwardedFor.split(',').map(normalize).filter((hop) => isIP(hop) !== 0);
  while (hops.length && isTrusted(trusted, client)) client = hops.pop()!;
  return client;
}

/**
 * The key a client is rate limited under: its IPv4 address, or the /64 of its IPv6 address (one
 * subscriber usually holds a whole /64, so single addresses would give it billions of budgets).
 */
export function rateLimitClientKey(ip: string): string {
  const address = normalize(ip).split('%')[0];
  if (isIP(address) !== 6) return address;
  return `${ipv6Groups(address).slice(0, 4).map((group) => group.toString(16)).join(':')}::/64`;
}

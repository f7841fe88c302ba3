import { sha256Hex } from '../../lib/crypto';
import { randomBase62 } from '../../lib/ids';

export const API_KEY_PREFIX = 'fs_live_';
const KEY_PATTERN = /^fs_live_[0-9A-Za-z]{32,128}$/;

export interface GeneratedKey {
  key: string;
  keyHash: string;
  prefix: string;
  last4: string;
}

export function generateApiKey(): GeneratedKey {
  const key = API_KEY_PREFIX + randomBase62(40);
  return { key, keyHash: hashApiKey(key), prefix: API_KEY_PREFIX, last4: key.slice(-4) };
}

/** Keys carry 238 bits of entropy, so a fast unsalted hash is safe and allows lookup by hash. */
export function hashApiKey(key: string): string {
  return sha256Hex(key);
}

export function looksLikeApiKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

/** Reads the key from `Authorization: Bearer …` or `X-API-Key`. */
export function extractApiKey(headers: Record<string, string | string[] | undefined>): string | null {
  const auth = headers['authorization'];
  if (typeof auth === 'string') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (match) return match[1];
  }
  const header = headers['x-api-key'];
  if (typeof header === 'string' && header.trim()) return header.trim();
  return null;
}

import * as crypto from 'node:crypto';
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Node's one-shot digest (20.12 and later) skips the Hash object: every API request hashes its key. */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

export function sha256Hex(value: string): string {
  return oneShotHash ? oneShotHash('sha256', value, 'hex') : createHash('sha256').update(value).digest('hex');
}

export function hmacSha256(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

/**
 * A key of its own for one use, derived from the encryption key: a token signed with it can never
 * stand in for anything else signed with the encryption key.
 */
export function purposeKey(encryptionKey: Buffer, purpose: string): Buffer {
  return hmacSha256(encryptionKey, purpose);
}

/** Whether a signature a client sent (base64url) is the expected one, compared in constant time. */
export function signatureMatches(given: string, expected: Buffer): boolean {
  const bytes = Buffer.from(given, 'base64url');
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

const SEALED_PREFIX = 'enc:v1:';

/** AES-256-GCM; the output carries its IV and tag so it can be stored as one string. */
export function seal(plain: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function unsealWith(raw: Buffer, key: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/**
 * Opens a sealed value with the first key that authenticates it: the current key, then the
 * previous ones while a key rotation is under way (GCM's tag tells a wrong key apart).
 */
export function unseal(sealed: string, keys: Buffer | readonly Buffer[]): string {
  if (!sealed.startsWith(SEALED_PREFIX)) throw new Error('not a sealed value');
  const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
  for (const key of Array.isArray(keys) ? keys : [keys]) {
    try {
      return unsealWith(raw, key);
    } catch {
      // not this key
    }
  }
  throw new Error('no encryption key opens this value (is a previous key missing from ENCRYPTION_KEYS_PREVIOUS?)');
}

export function isSealed(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(SEALED_PREFIX);
}

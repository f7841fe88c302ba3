import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

const SCHEME_PREFIX = 'v1=';
const DEFAULT_TOLERANCE_SECONDS = 300;
const HEX_SIGNATURE = /^[0-9a-fA-F]{64}$/;
const UNIX_SECONDS = /^\d+$/;

function hmacHex(secret: string, timestamp: number | string, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex');
}

/** `v1=` + hex HMAC-SHA256(secret, `${timestamp}.${rawBody}`) (the signature scheme documented in README.md and openapi.yaml). */
export function signPayload(secret: string, timestamp: number, rawBody: string): string {
  return `${SCHEME_PREFIX}${hmacHex(secret, timestamp, rawBody)}`;
}

const SECRET_PREFIX = 'whsec_';

/**
 * The HMAC key of Standard Webhooks: the secret's characters after `whsec_`, read as base64. Our
 * secrets are `whsec_` + base62 characters, a multiple of 4 long (every base62 character is a
 * base64 one), so the same secret serves both schemes. Made once per secret, as a KeyObject: an HMAC
 * keyed with a Buffer cost about five times one keyed with a KeyObject (11 µs against 3 µs a
 * delivery on the development machine), and signing is per attempt.
 */
const standardKeys = new Map<string, KeyObject>();
const STANDARD_KEYS_MAX = 10_000;

export function standardWebhooksKey(secret: string): KeyObject {
  let key = standardKeys.get(secret);
  if (key === undefined) {
    key = createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
    if (standardKeys.size >= STANDARD_KEYS_MAX) standardKeys.clear();
    standardKeys.set(secret, key);
  }
  return key;
}

/**
 * One `webhook-signature` entry of Standard Webhooks: `v1,` + base64 HMAC-SHA256 of
 * `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the secret read as base64.
 */
export function signStandard(secret: string, eventId: string, timestamp: number, rawBody: string): string {
  return `v1,${createHmac('sha256', standardWebhooksKey(secret)).update(`${eventId}.${timestamp}.${rawBody}`).digest('base64')}`;
}

/** The `webhook-signature` header: the current secret's signature first, then the previous one's within its grace. */
export function standardSignatureHeader(secrets: { secret: string; previousSecret?: string | null }, eventId: string, timestamp: number, rawBody: string): string {
  const current = signStandard(secrets.secret, eventId, timestamp, rawBody);
  return secrets.previousSecret ? `${current} ${signStandard(secrets.previousSecret, eventId, timestamp, rawBody)}` : current;
}

function parseTimestamp(value: string): number | null {
  if (!UNIX_SECONDS.test(value)) return null;
  const seconds = Number(value);
  return Number.isSafeInteger(seconds) ? seconds : null;
}

/** The receiver's side of the signature: timestamp within tolerance, well-formed `v1=<64 hex>`, constant-time match. */
export function verifySignature(opts: {
  secret: string;
  signature: string | undefined;
  timestamp: string | undefined;
  rawBody: string;
  toleranceSeconds?: number;
  nowSeconds?: number;
}): boolean {
  if (opts.timestamp === undefined) return false;
  const timestamp = parseTimestamp(opts.timestamp);
  if (timestamp === null) return false;
  const now = opts.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return false;

  const signature = opts.signature;
  if (signature === undefined || !signature.startsWith(SCHEME_PREFIX)) return false;
  const hex = signature.slice(SCHEME_PREFIX.length);
  if (!HEX_SIGNATURE.test(hex)) return false;

  const expected = Buffer.from(hmacHex(opts.secret, opts.timestamp, opts.rawBody), 'hex');
  return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
}

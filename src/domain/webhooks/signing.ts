import { createHmac, timingSafeEqual } from 'node:crypto';

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

// The public form's `telemetry.analyticsToken`: `<base64url payload>.<base64url HMAC-SHA256>`, the
// payload naming the form (`f`) and the expiry in Unix seconds (`e`). It only proves that the events
// endpoint is called for a form this service served recently; it grants nothing else.
import { hmacSha256, purposeKey, signatureMatches } from '../../lib/crypto';

export const ANALYTICS_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;
const PURPOSE = 'analytics-token';
const MAX_TOKEN_LENGTH = 512;

/** A key of its own, so a token can never stand in for anything else signed with the encryption key. */
export function analyticsTokenKey(encryptionKey: Buffer): Buffer {
  return purposeKey(encryptionKey, PURPOSE);
}

export function issueAnalyticsToken(key: Buffer, formId: string, nowMs = Date.now(), ttlMs = ANALYTICS_TOKEN_TTL_MS): string {
  const payload = Buffer.from(JSON.stringify({ f: formId, e: Math.floor((nowMs + ttlMs) / 1000) })).toString('base64url');
  return `${payload}.${hmacSha256(key, payload).toString('base64url')}`;
}

function readPayload(encoded: string): { f: unknown; e: unknown } | null {
  try {
    const payload: unknown = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
    return payload && typeof payload === 'object' ? payload as { f: unknown; e: unknown } : null;
  } catch {
    return null;
  }
}

/** True when the token was signed with `key`, names `formId` and has not expired. */
export function verifyAnalyticsToken(key: Buffer, token: unknown, formId: string, nowMs = Date.now()): boolean {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return false;
  const [payload, signature, ...rest] = token.split('.');
  if (!payload || !signature || rest.length) return false;
  if (!signatureMatches(signature, hmacSha256(key, payload))) return false;
  const claims = readPayload(payload);
  return !!claims && claims.f === formId && typeof claims.e === 'number' && claims.e * 1000 > nowMs;
}

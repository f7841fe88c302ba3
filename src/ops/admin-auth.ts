import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The token an operator presents: `Authorization: Bearer <token>`, or the password of Basic
 * credentials, which is what a browser can send to the queue dashboard.
 */
export function presentedAdminToken(authorization: string | undefined): string | null {
  const match = /^\s*(bearer|basic)\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!match) return null;
  if (match[1].toLowerCase() === 'bearer') return match[2];
  const credentials = Buffer.from(match[2], 'base64').toString('utf8');
  const colon = credentials.indexOf(':');
  return colon >= 0 ? credentials.slice(colon + 1) : null;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Compared in constant time; hashing first makes the comparison independent of the lengths too. */
export function isAdminAuthorized(authorization: string | undefined, adminToken: string): boolean {
  const presented = presentedAdminToken(authorization);
  return presented !== null && timingSafeEqual(digest(presented), digest(adminToken));
}

/** `Authorization: Bearer <token>` with exactly this token (the /metrics token), compared in constant time. */
export function isBearerAuthorized(authorization: string | undefined, token: string): boolean {
  const match = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return match !== null && timingSafeEqual(digest(match[1]), digest(token));
}

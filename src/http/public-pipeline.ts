import type { Request, Response } from 'restify';
import type { AppContext } from '../app';
import { parseTrustedProxies, resolveClientIp } from '../lib/client-ip';
import { ApiError, unexpectedError } from './errors';
import { describeError, sendReply, type Reply } from './pipeline';
import { requestState } from './request-state';

/** A failure in the public error shape (the public error shape of openapi.yaml): `{success:false, error}` or `{success:false, errors}`. */
export class PublicError extends Error {
  constructor(
    readonly status: number,
    readonly body: { success: false; error?: string; errors?: Record<string, string>; message?: string; form?: unknown },
    readonly headers: Record<string, string | number> = {},
  ) {
    super(body.error ?? 'field validation failed');
  }
}

export const publicErrors = {
  formNotFound: () => new PublicError(404, { success: false, error: 'not_found', message: 'Form not found' }),
  invalidData: (message: string) => new PublicError(400, { success: false, error: 'invalid_data', message }),
  rateLimited: (retryAfter: number) =>
    new PublicError(429, { success: false, error: 'rate_limit_exceeded' }, { 'Retry-After': retryAfter }),
  internal: () => new PublicError(500, { success: false, error: 'internal_error' }),
};

/**
 * The public JSON runtime may be called from any site (custom front ends): no credentials are ever
 * involved, so any origin may read the answers, rate-limit headers included.
 */
export const PUBLIC_CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, X-Request-Id',
};

const PREFLIGHT_HEADERS = {
  ...PUBLIC_CORS_HEADERS,
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

/** Answers a CORS preflight for a public JSON path. */
export async function publicPreflight(_req: Request, res: Response): Promise<void> {
  for (const [name, value] of Object.entries({ ...PUBLIC_SECURITY_HEADERS, ...PREFLIGHT_HEADERS })) res.header(name, value);
  res.status(204);
  res.end();
}

/** Headers every public response carries. */
export const PUBLIC_SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  // Prefill values may sit in the query string: other origins see the origin only.
  'Referrer-Policy': 'strict-origin-when-cross-origin',
};

/** The client address of a request: the peer, or what `TRUSTED_PROXIES` vouch for in X-Forwarded-For. */
export function clientIpResolver(trustedProxies: readonly string[]): (req: Request) => string {
  const trusted = parseTrustedProxies(trustedProxies);
  return (req) => resolveClientIp(trusted, req.socket?.remoteAddress, req.header('x-forwarded-for') || undefined);
}

function toPublicError(err: unknown): PublicError | null {
  if (err instanceof PublicError) return err;
  if (err instanceof ApiError) return new PublicError(err.status, { success: false, error: err.code }, err.headers);
  return null;
}

const PUBLIC_RESPONSE_HEADERS = Object.entries({ ...PUBLIC_SECURITY_HEADERS, ...PUBLIC_CORS_HEADERS });

export type PublicHandler = (req: Request, res: Response) => Promise<Reply>;

/** Runs a public handler; anything it throws is answered in the public error shape, never with internals. */
export function publicRoute(app: AppContext, handler: PublicHandler) {
  return async function publicRouteHandler(req: Request, res: Response): Promise<void> {
    for (const [name, value] of PUBLIC_RESPONSE_HEADERS) res.setHeader(name, value);
    try {
      sendReply(res, await handler(req, res));
    } catch (err) {
      const known = toPublicError(err);
      if (!known) app.logger.error({ err: describeError(err), reqId: requestState(req).requestId }, 'unhandled error');
      const failure = known ?? toPublicError(unexpectedError(err))!;
      sendReply(res, { status: failure.status, body: failure.body, headers: { 'Cache-Control': 'no-store', ...failure.headers } });
    }
  };
}

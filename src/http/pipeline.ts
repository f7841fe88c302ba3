import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { Request, Response } from 'restify';
import type { AppContext } from '../app';
import type { Em } from '../db/orm';
import { extractApiKey } from '../domain/auth/api-keys';
import type { AuthenticatedKey } from '../domain/auth/key-store';
import { hasScope, type Scope } from '../domain/auth/scopes';
import { PLAN_LIMITS } from '../../config/plans';
import { jsonBodyProblem } from '../lib/json-guard';
import { metrics } from '../lib/metrics';
import { annotate } from '../lib/tracing';
import { ApiError, errors, unexpectedError } from './errors';
import { requestState } from './request-state';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string | number>;
  /** A streamed body instead of `body`: stages piped in order into the response. */
  stream?: Readable[];
}

export interface AuthedContext {
  app: AppContext;
  req: Request;
  key: AuthenticatedKey;
  organizationId: string;
  /** A fresh EntityManager for this request only. */
  em: Em;
  /** The same for reads that may lag (the read replica when one is configured). */
  readEm: Em;
  /** The parsed JSON body; throws `invalid_json` when it is not JSON. */
  json(): unknown;
}

export type AuthedHandler = (ctx: AuthedContext) => Promise<Reply>;

export function parseJsonBody(req: Request): unknown {
  const raw = req.body;
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '') ||
      (Buffer.isBuffer(raw) && raw.length === 0)) {
    throw errors.invalidJson();
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw));
  } catch {
    throw errors.invalidJson();
  }
  const problem = jsonBodyProblem(parsed);
  if (problem) throw errors.invalidJson(problem);
  return parsed;
}

/**
 * Streams a body with backpressure. Once the first byte is out an error can no longer be answered:
 * the response is cut short (a client sees an incomplete transfer), and a client that goes away
 * stops the stream, which releases what feeds it.
 */
export async function streamReply(app: AppContext, req: Request, res: Response, reply: Reply): Promise<void> {
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.header(name, String(value));
  res.writeHead(reply.status);
  try {
    await pipeline([...reply.stream!, res]);
  } catch (err: any) {
    const clientGone = err?.code === 'ERR_STREAM_PREMATURE_CLOSE';
    if (clientGone) app.logger.debug({ reqId: requestState(req).requestId }, 'client went away during a streamed answer');
    else app.logger.error({ err: describeError(err), reqId: requestState(req).requestId }, 'streamed answer failed midway');
  }
}

export function sendReply(res: Response, reply: Reply): void {
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.header(name, String(value));
  if (reply.body === undefined) {
    res.status(reply.status);
    res.end();
  } else {
    res.send(reply.status, reply.body);
  }
}

/** Database errors quote the statement and its values; only the kind and the stack are logged. */
export function describeError(err: unknown): Record<string, unknown> {
  const e = err as any;
  return { name: e?.name, code: e?.code, constraint: e?.constraint, stack: String(e?.stack ?? '').split('\n').filter((l) => l.trim().startsWith('at ')).slice(0, 12).join('\n') };
}

export function sendApiError(app: AppContext, req: Request, res: Response, err: unknown): void {
  const apiError = err instanceof ApiError ? err : unexpectedError(err);
  if (!(err instanceof ApiError)) app.logger.error({ err: describeError(err), reqId: requestState(req).requestId }, 'unhandled error');
  sendReply(res, { status: apiError.status, body: apiError.toJSON(), headers: apiError.headers });
}

/**
/**
 * 401 unless the request carries a valid key, then counts it against the key's per-minute budget
 * (429 once spent). The rate-limit headers are set before anything can fail, so errors carry them.
 */
export async function admitKey(app: AppContext, req: Request, res: Response): Promise<AuthenticatedKey> {
  const key = await app.keyStore.authenticate(extractApiKey(req.headers));
  if (!key) throw errors.unauthorized();
  requestState(req).organizationId = key.organizationId;
  annotate({ 'form_service.organization.id': key.organizationId });

  const decision = await app.rateLimiter.hit(`key:${key.id}`, PLAN_LIMITS[key.plan].requestsPerMinute);
  res.header('X-RateLimit-Limit', String(decision.limit));
  res.header('X-RateLimit-Remaining', String(decision.remaining));
  res.header('X-RateLimit-Reset', String(decision.resetAt));
  if (!decision.allowed) {
    metrics.rateLimitRejections.inc({ scope: 'api' });
    throw errors.rateLimited(decision.retryAfter);
  }
  return key;
}

/**
 * An authenticated request's context, its EntityManagers forked on first use (the submission path
 * never needs one). A class, not an object literal with getters: V8 gives each such literal a map
 * of its own, kept in the old generation, whose getters reach the request, so every request's
 * objects survived young collections until a full one (8 MB promoted per scavenge under load,
 * scavenges ten times longer).
 */
class RequestContext implements AuthedContext {
  readonly organizationId: string;
  private forkedEm?: Em;
  private forkedReadEm?: Em;

  constructor(readonly app: AppContext, readonly req: Request, readonly key: AuthenticatedKey) {
    this.organizationId = key.organizationId;
  }

  get em(): Em {
    return (this.forkedEm ??= this.app.orm.em.fork());
  }

  get readEm(): Em {
    return (this.forkedReadEm ??= this.app.readOrm.em.fork());
  }

  /** A property, not a method: handlers take it out of the context (`{ json }`). */
  readonly json = (): unknown => parseJsonBody(this.req);
}

/**
 * The authenticated request pipeline, checks in this order:
 * 401 key → 429 rate limit (every request with a valid key counts) → 403 scope → handler.
 */
export function authenticated(app: AppContext, scope: Scope, handler: AuthedHandler) {
  return async function authenticatedRoute(req: Request, res: Response): Promise<void> {
    try {
      const key = await admitKey(app, req, res);
      if (!hasScope(key.scopes, scope)) throw errors.forbidden(scope);

      const reply = await handler(new RequestContext(app, req, key));
      if (reply.stream) await streamReply(app, req, res, reply);
      else sendReply(res, reply);
    } catch (err) {
      sendApiError(app, req, res, err);
    }
  };
}

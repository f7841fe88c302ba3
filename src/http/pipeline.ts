import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { Request, Response } from 'restify';
import type { AppContext } from '../app';
import type { Em, Orm } from '../db/orm';
import { extractApiKey } from '../domain/auth/api-keys';
import type { AuthenticatedKey } from '../domain/auth/key-store';
import { hasScope, type Scope } from '../domain/auth/scopes';
import { PLAN_LIMITS } from '../../config/plans';
import { jsonBodyProblem } from '../lib/json-guard';
import { metrics } from '../lib/metrics';
import { annotate } from '../lib/tracing';
import { ApiError, dependencyFailure, dependencyUnavailable, errors, unexpectedError, type DependencyFailure } from './errors';
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
  /**
   * Runs a read that may lag on the read replica when one is configured, and once more on the
   * primary when the replica fails (`readFromReplica`): `read` gets an EntityManager (and the ORM)
   * of the database it runs on.
   */
  readLagging<T>(read: (em: Em, orm: Orm) => Promise<T>, discard?: (late: T) => void): Promise<T>;
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

/** A read that may lag and its retry on the primary answer within this, as every request does within 5 s. */
const LAGGING_READ_BUDGET_MS = 4_500;
/** With less of it left, the primary is not asked: the replica's failure is the answer (503). */
const MIN_PRIMARY_ATTEMPT_MS = 250;
/** A failing replica is logged at most this often per process; the metric counts every failure. */
const REPLICA_WARNING_INTERVAL_MS = 10_000;
const replicaWarnedAt = new WeakMap<AppContext, number>();
/**
 * Reads that may lag running on the primary for the replica at once, per process, counted until
 * their attempt ends (past its request's 503 too: a statement is not cancelled when the budget runs
 * out). At most half the primary's pool: while the replica is down or slow every such read falls
 * back, and the rest of the pool stays for what only the primary serves (submissions, a
 * submission's read); past it the replica's failure is the answer (503).
 */
const primaryFallbacks = new WeakMap<AppContext, number>();

/**
 * Why the replica failed a read that the primary may well answer: a dependency's failure, or
 * `behind`, a replica that has not replayed yet the migration that made a table, column or function
 * the release reads (undefined_table, undefined_column, undefined_function), as one lagging while a
 * new release starts after its migrations. On the primary that is a fault of the code (500).
 * The label of `formservice_replica_read_failures_total`.
 */
export type ReplicaFailure = DependencyFailure | 'behind';
const SCHEMA_NOT_REPLAYED_CODES = new Set(['42P01', '42703', '42883']);

export function replicaFailure(err: unknown): ReplicaFailure | null {
  return dependencyFailure(err) ?? (SCHEMA_NOT_REPLAYED_CODES.has((err as { code?: string } | null)?.code ?? '') ? 'behind' : null);
}

/**
 * Runs a read that may lag (lists, the export, the change feed, analytics) on the read replica and,
 * when the replica fails for a reason of its own rather than the read's (a conflict with recovery,
 * a statement cancelled or timed out, a connection refused, reset or unanswered, a migration not
 * replayed yet: `replicaFailure`), once more on the
 * primary with what is left of the budget, unless half the primary's pool is taken by such reads
 * already (`primaryFallbacks`). The failure is counted by reason and logged without the
 * statement or its values. Whatever the primary answers after the budget is handed to `discard`
 * (an export's streams, which hold a connection).
 */
async function readFromReplica<T>(app: AppContext, read: (orm: Orm) => Promise<T>, discard?: (late: T) => void): Promise<T> {
  if (app.readOrm === app.orm) return read(app.orm);
  const deadline = Date.now() + LAGGING_READ_BUDGET_MS;
  try {
    return await read(app.readOrm);
  } catch (err) {
    const reason = replicaFailure(err);
    if (!reason) throw err;
    metrics.replicaReadFailures.inc({ reason });
    warnReplicaFailed(app, err, reason);
    const left = deadline - Date.now();
    const running = primaryFallbacks.get(app) ?? 0;
    if (left < MIN_PRIMARY_ATTEMPT_MS || running >= Math.max(1, Math.floor(app.config.dbPoolMax / 2))) throw dependencyUnavailable();
    primaryFallbacks.set(app, running + 1);
    const attempt = read(app.orm);
    attempt.then(fallbackEnded, fallbackEnded);
    return withinMs(attempt, left, dependencyUnavailable, discard);
  }

  function fallbackEnded(): void {
    primaryFallbacks.set(app, (primaryFallbacks.get(app) ?? 1) - 1);
  }
}

function warnReplicaFailed(app: AppContext, err: unknown, reason: ReplicaFailure): void {
  const now = Date.now();
  if (now - (replicaWarnedAt.get(app) ?? 0) < REPLICA_WARNING_INTERVAL_MS) return;
  replicaWarnedAt.set(app, now);
  app.logger.warn({ err: describeError(err), reason }, 'read replica failed: reads that may lag are answered by the primary');
}

/** What `attempt` gives, or `late()` thrown after `ms`; what the attempt gives after that goes to `discard`. */
async function withinMs<T>(attempt: Promise<T>, ms: number, late: () => Error, discard?: (value: T) => void): Promise<T> {
  let gaveUp = false;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      gaveUp = true;
      reject(late());
    }, ms);
  });
  attempt.then((value) => { if (gaveUp) discard?.(value); }, () => undefined);
  try {
    return await Promise.race([attempt, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

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
 * An authenticated request's context, its EntityManager forked on first use (the submission path
 * never needs one; each read that may lag forks its own). A class, not an object literal with getters: V8 gives each such literal a map
 * of its own, kept in the old generation, whose getters reach the request, so every request's
 * objects survived young collections until a full one (8 MB promoted per scavenge under load,
 * scavenges ten times longer).
 */
class RequestContext implements AuthedContext {
  readonly organizationId: string;
  private forkedEm?: Em;

  constructor(readonly app: AppContext, readonly req: Request, readonly key: AuthenticatedKey) {
    this.organizationId = key.organizationId;
  }

  get em(): Em {
    return (this.forkedEm ??= this.app.orm.em.fork());
  }

  /** Properties, not methods: handlers take them out of the context (`{ json }`). */
  readonly json = (): unknown => parseJsonBody(this.req);

  readonly readLagging = <T>(read: (em: Em, orm: Orm) => Promise<T>, discard?: (late: T) => void): Promise<T> =>
    readFromReplica(this.app, (orm) => read(orm.em.fork(), orm), discard);
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

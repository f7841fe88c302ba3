import { randomUUID } from 'node:crypto';
import restify, { type Request, type Response, type Server } from 'restify';
import type { AppContext } from '../app';
import { metrics } from '../lib/metrics';
import { nameRequestSpan, tracingEnabled } from '../lib/tracing';
import { ApiError, errors, unexpectedError } from './errors';
import { extractApiKey } from '../domain/auth/api-keys';
import { admitKey, describeError } from './pipeline';
import { registerAdminRoutes } from './routes/admin';
import { registerAnalyticsRoutes } from './routes/analytics';
import { registerDocsRoutes } from './routes/docs';
import { registerFileRoutes } from './routes/files';
import { registerFormRoutes } from './routes/forms';
import { registerHostedRoutes } from './routes/hosted';
import { registerOpsRoutes, type Lifecycle } from './routes/ops';
import { registerPublicRoutes } from './routes/public';
import { registerSubmissionRoutes } from './routes/submissions';
import { registerWebhookRoutes } from './routes/webhooks';
import { requestState } from './request-state';

export const MAX_BODY_BYTES = 1024 * 1024;

/** Public runtime paths answer in the public error shape; everything else in the API's. */
function isPublicPath(url: string | undefined): boolean {
  return !!url && (url.startsWith('/public/') || url.startsWith('/f/'));
}

function translateRestifyError(err: any, method: string): ApiError {
  switch (err?.statusCode) {
    case 404: return errors.notFound('No such path');
    case 405: return errors.methodNotAllowed(method);
    case 413: return errors.payloadTooLarge();
    case 415: return errors.unsupportedEncoding();
    case 400: return errors.invalidJson();
    default: return errors.internal();
  }
}

export interface RouteEntry {
  method: string;
  /** OpenAPI style: `/v1/forms/{formId}`. */
  path: string;
}

/** Every route the server answers, as the OpenAPI document must list it. */
export function routeTable(server: Server): RouteEntry[] {
  const routes = Object.values((server as any).router.getRoutes()) as Array<{ method: string; path: string }>;
  return routes
    .map((r) => ({ method: r.method.toLowerCase(), path: r.path.replace(/:(\w+)/g, '{$1}') }))
    .sort((a, b) => `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`));
}

/**
 * bodyReader reads a whole oversized body before it answers 413, so a declared length is refused up
 * front; and it counts compressed bytes, so a compressed body (which could expand without bound) is
 * refused outright.
 */
function guardRequestBody(req: Request, _res: Response, next: (err?: unknown) => void): void {
  const declared = Number(req.header('content-length'));
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) return next(Object.assign(new Error('Request body exceeds 1 MB'), { statusCode: 413 }));
  const encoding = req.header('content-encoding');
  if (encoding && encoding.toLowerCase() !== 'identity') {
    return next(Object.assign(new Error('Compressed request bodies are not accepted'), { statusCode: 415 }));
  }
  return next();
}

function isFileUpload(req: Request): boolean {
  return req.method === 'PUT' && !!req.url?.startsWith('/uploads/');
}

/** The route pattern, never the raw URL, so metric labels stay bounded; requests no route took are 'unmatched'. */
function routeLabel(req: Request, route: any): string {
  return String(route?.spec?.path ?? requestState(req).routeLabel ?? 'unmatched');
}

/**
 * Shapes what restify's router refuses (unknown path, wrong method, body too large) like every other
 * error. Under /v1 a request that presents a key is still a request with that key: it is checked
 * and counted first (401 and 429 come before any other answer), so it can get 401 or 429 and always carries rate-limit headers.
 */
async function answerRouterError(app: AppContext, req: Request, res: Response, err: any): Promise<void> {
  let apiError = translateRestifyError(err, req.method ?? 'GET');
  if (apiError.status === 500) app.logger.error({ err: describeError(err) }, 'unhandled error');
  if ((apiError.status === 404 || apiError.status === 405) && req.url?.startsWith('/v1/') && extractApiKey(req.headers)) {
    try {
      await admitKey(app, req, res);
    } catch (refusal) {
      apiError = refusal instanceof ApiError ? refusal : unexpectedError(refusal);
    }
  }
  for (const [name, value] of Object.entries(apiError.headers)) res.header(name, String(value));
  const body = isPublicPath(req.url) ? { success: false, error: apiError.code } : apiError.toJSON();
  err.statusCode = apiError.status;
  err.toJSON = () => body;
  err.body = body;
}

export interface HttpServer {
  server: Server;
  lifecycle: Lifecycle;
}

export function createHttpServer(app: AppContext): HttpServer {
  const lifecycle: Lifecycle = { draining: false };
  const server = restify.createServer({ name: 'form-service', handleUncaughtExceptions: false, ignoreTrailingSlash: true });
  // Behind a load balancer an idle connection must outlive the balancer's own idle timeout (often
  // 60 s), or the balancer reuses a connection just closed here and its client gets a 502.
  server.server.keepAliveTimeout = app.config.httpKeepAliveTimeoutMs;
  server.server.headersTimeout = app.config.httpHeadersTimeoutMs;

  server.pre((req: Request, res: Response, next) => {
    const incoming = req.header('x-request-id');
    const requestId = incoming && /^[\w.-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    requestState(req).requestId = requestId;
    requestState(req).startedAt = process.hrtime.bigint();
    res.setHeader('X-Request-Id', requestId);
    // While draining, answer and close: clients reconnect to a replica that stays.
    if (lifecycle.draining) res.setHeader('Connection', 'close');
    return next();
  });
  if (tracingEnabled()) {
    server.use((req: Request, _res: Response, next) => {
      nameRequestSpan(req.method, req.getRoute()?.path?.toString(), { 'form_service.request.id': requestState(req).requestId });
      return next();
    });
  }
  server.use(restify.plugins.queryParser({ mapParams: false }));
  // A file sent to the service's own upload URL is streamed by its route, never read as a body.
  const readBody = restify.plugins.bodyReader({ maxBodySize: MAX_BODY_BYTES }) as unknown as restify.RequestHandler;
  server.use((req: Request, res: Response, next) => (isFileUpload(req) ? next() : guardRequestBody(req, res, next)));
  server.use((req: Request, res: Response, next) => (isFileUpload(req) ? next() : readBody(req, res, next)));

  registerOpsRoutes(server, app, lifecycle);
  registerDocsRoutes(server, app);
  registerAdminRoutes(server, app);
  registerFormRoutes(server, app);
  registerSubmissionRoutes(server, app);
  registerWebhookRoutes(server, app);
  registerAnalyticsRoutes(server, app);
  registerPublicRoutes(server, app);
  registerFileRoutes(server, app);
  registerHostedRoutes(server, app);

  server.on('restifyError', (req: Request, res: Response, err: any, callback: () => void) => {
    void answerRouterError(app, req, res, err).finally(callback);
  });

  // The access line's fields are fixed and never secret, so it skips the redaction every other line
  // goes through: with its wildcard paths, redaction cost ten times the rest of writing the line.
  const accessLog = app.logger.child({}, { redact: [] });
  // One histogram child per method, route and status, looked up by a string key instead of
  // prom-client hashing a label object on every request.
  const durationByLabels = new Map<string, { observe(value: number): void }>();
  const observeDuration = (method: string | undefined, route: string, status: number, seconds: number) => {
    const key = `${method} ${status} ${route}`;
    let child = durationByLabels.get(key);
    if (!child) {
      child = metrics.httpDuration.labels({ method, route, status: String(status) });
      durationByLabels.set(key, child);
    }
    child.observe(seconds);
  };
  server.on('after', (req: Request, res: Response, route: any) => {
    const started = requestState(req).startedAt;
    const seconds = started ? Number(process.hrtime.bigint() - started) / 1e9 : 0;
    const routePath = routeLabel(req, route);
    observeDuration(req.method, routePath, res.statusCode, seconds);
    accessLog.info({
      reqId: requestState(req).requestId, method: req.method, route: routePath, status: res.statusCode,
      durationMs: Math.round(seconds * 1000), organizationId: requestState(req).organizationId,
    }, 'request');
  });

  return { server, lifecycle };
}

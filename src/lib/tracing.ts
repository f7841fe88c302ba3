import type * as OtelApi from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';

/**
 * OpenTelemetry traces, on only when an OTLP endpoint is configured. Nothing of OpenTelemetry is
 * required otherwise: its context manager installs async hooks that cost on every request. Entry
 * points call startTracing before they import anything that loads http, pg or ioredis, so the
 * instrumentations patch those modules when they are first required.
 */

export type ProcessRole = 'all-in-one' | 'api' | 'worker';

type Attributes = Record<string, string | number | boolean | undefined>;

let api: typeof OtelApi | undefined;
let sdk: { shutdown(): Promise<void> } | undefined;
let queueTelemetry: Telemetry | undefined;

const DEFAULT_SERVICE_NAME = 'form-service';

/** Probes and scrapes: a span each would drown the traces that matter. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/livez', '/metrics']);

export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (/^true$/i.test(env.OTEL_SDK_DISABLED ?? '')) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export function tracingEnabled(): boolean {
  return api !== undefined;
}

/** A URL with its query left out: query strings may carry tokens (a receiver's URL) or pre-filled values. */
function withoutQuery(url: string): string {
  const at = url.indexOf('?');
  return at === -1 ? url : url.slice(0, at);
}

const URL_ATTRIBUTES = ['http.url', 'url.full', 'http.target'] as const;

/** Where the pg instrumentation puts a statement's text, by semantic-conventions version. */
const STATEMENT_ATTRIBUTES = ['db.query.text', 'db.statement'] as const;

/** A statement with each quoted literal replaced: MikroORM writes values (ids, hashes, data) into the text. */
export function withoutLiterals(sql: string): string {
  return sql.replace(/\b[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'/g, "'?'");
}

function stripQueries(span: OtelApi.Span): void {
  if (!span.isRecording()) return;
  const attributes = (span as unknown as { attributes?: Record<string, unknown> }).attributes ?? {};
  for (const name of URL_ATTRIBUTES) {
    const value = attributes[name];
    if (typeof value === 'string' && value.includes('?')) span.setAttribute(name, withoutQuery(value));
  }
  if (attributes['url.query'] !== undefined) span.setAttribute('url.query', '');
}

/**
 * Starts the SDK for this process: OTLP over HTTP (`OTEL_EXPORTER_OTLP_PROTOCOL`, `http/protobuf` by
 * default, or `http/json`), the sampler and the rest from the standard OTEL_* variables. Traces only:
 * the service's metrics are Prometheus' and its logs pino's.
 */
export function startTracing(role: ProcessRole, queues: readonly string[] = []): void {
  if (api || !tracingRequested()) return;
  /* eslint-disable @typescript-eslint/no-require-imports */
  const otel = require('@opentelemetry/api') as typeof OtelApi;
  const { NodeSDK } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof import('@opentelemetry/instrumentation-pg');
  const { IORedisInstrumentation } = require('@opentelemetry/instrumentation-ioredis') as typeof import('@opentelemetry/instrumentation-ioredis');
  /* eslint-enable @typescript-eslint/no-require-imports */

  const instance = new NodeSDK({
    // Lowest priority: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (read by the env detector) win.
    resource: defaultResource().merge(resourceFromAttributes({
      'service.name': DEFAULT_SERVICE_NAME,
      'form_service.process.role': role,
      ...(queues.length ? { 'form_service.worker.queues': [...queues] } : {}),
    })),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.has(withoutQuery(req.url ?? '')),
        // Headers are never recorded (no headersToSpanAttributes): Authorization and X-API-Key stay out.
        applyCustomAttributesOnSpan: (span) => stripQueries(span),
      }),
      // Statements only, never their parameters (enhancedDatabaseReporting stays off) nor the values
      // the ORM writes into a statement's text; no span without a parent, so pool upkeep and timers
      // make no traces of their own.
      new PgInstrumentation({
        requireParentSpan: true, ignoreConnectSpans: true,
        requestHook: (span, { query }) => {
          if (!span.isRecording()) return;
          const text = withoutLiterals(query.text);
          for (const name of STATEMENT_ATTRIBUTES) span.setAttribute(name, text);
        },
      }),
      // The command's name alone: its arguments may be keys or values.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  instance.start();
  api = otel;
  sdk = instance;
}

/** Sends what is still buffered; called once by the shutdown sequence. */
export async function stopTracing(): Promise<void> {
  const running = sdk;
  sdk = undefined;
  await running?.shutdown().catch(() => undefined);
}

/** BullMQ's own telemetry for a Queue or Worker: the job carries its producer's context in Redis. */
export function bullmqTelemetry(): Telemetry | undefined {
  if (!api) return undefined;
  if (!queueTelemetry) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { BullMQOtel } = require('bullmq-otel') as typeof import('bullmq-otel');
    queueTelemetry = new BullMQOtel({ tracerName: DEFAULT_SERVICE_NAME }) as unknown as Telemetry;
  }
  return queueTelemetry;
}

function clean(attributes: Attributes): OtelApi.Attributes {
  const out: OtelApi.Attributes = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value;
  return out;
}

/** Adds attributes to the span in progress (the HTTP request, the job), if tracing is on. */
export function annotate(attributes: Attributes): void {
  if (!api) return;
  api.trace.getActiveSpan()?.setAttributes(clean(attributes));
}

/** Names the HTTP server span after its route (`POST /v1/forms/:formId/submissions`), as the metrics label it. */
export function nameRequestSpan(method: string | undefined, route: string | undefined, attributes: Attributes = {}): void {
  const span = api?.trace.getActiveSpan();
  if (!span) return;
  if (route) {
    span.updateName(`${method ?? 'HTTP'} ${route}`);
    span.setAttribute('http.route', route);
  }
  span.setAttributes(clean(attributes));
}

export type SpanKindName = 'internal' | 'producer' | 'consumer' | 'client';

/**
 * Runs `fn` inside a span of its own, child of the active one; without tracing, just runs it.
 * `fn` may add attributes once it knows them (a status code) through `annotate`.
 */
export async function inSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>, kind: SpanKindName = 'internal'): Promise<T> {
  const otel = api;
  if (!otel) return fn();
  const spanKind = {
    internal: otel.SpanKind.INTERNAL, producer: otel.SpanKind.PRODUCER, consumer: otel.SpanKind.CONSUMER, client: otel.SpanKind.CLIENT,
  }[kind];
  return otel.trace.getTracer(DEFAULT_SERVICE_NAME).startActiveSpan(name, { kind: spanKind, attributes: clean(attributes) }, async (span) => {
    try {
      return await fn();
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * The active context as BullMQ stores it in a job (`opts.telemetry.metadata`), so a job added in a
 * batch with other requests' jobs still continues its own trace; undefined without tracing.
 */
export function jobTraceMetadata(): string | undefined {
  if (!api) return undefined;
  const carrier: Record<string, string> = {};
  api.propagation.inject(api.context.active(), carrier);
  return carrier.traceparent ? JSON.stringify(carrier) : undefined;
}

/**
 * Runs `fn` as the processing (a consumer span) of work queued under `metadata` (jobTraceMetadata),
 * continuing the trace it was queued in: one member of a job that carries several traces.
 */
export async function continuingTrace<T>(metadata: string | undefined, name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  const otel = api;
  if (!otel || !metadata) return inSpan(name, attributes, fn, 'consumer');
  let carrier: Record<string, string> = {};
  try {
    carrier = JSON.parse(metadata) as Record<string, string>;
  } catch { /* not ours: the span goes under the active one */ }
  return otel.context.with(otel.propagation.extract(otel.context.active(), carrier), () => inSpan(name, attributes, fn, 'consumer'));
}

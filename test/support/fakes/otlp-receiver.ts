import { startLoopbackServer } from './http-server';

/** One exported span, flattened from OTLP/JSON with its resource's attributes. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  status: { code?: number; message?: string };
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface OtlpReceiver {
  /** What exporters should be given as OTEL_EXPORTER_OTLP_ENDPOINT. */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Every request body as received, to look for what must never be exported. */
  rawBodies: string[];
  /** The content types of the export requests (application/json, application/x-protobuf). */
  contentTypes: string[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: AnyValue[] } };

function valueOf(value: AnyValue | undefined): unknown {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(list: Array<{ key: string; value: AnyValue }> | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/**
 * An OTLP/HTTP trace receiver on loopback. Requests in the JSON protocol (`http/json`) are decoded
 * into `spans`; any request (protobuf too) is kept raw in `rawBodies`.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const rawBodies: string[] = [];
  const contentTypes: string[] = [];
  const server = await startLoopbackServer(async (req, res) => {
    const json = Boolean(req.headers['content-type']?.includes('json'));
    const body = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
    // Protobuf is kept byte for byte (latin1), so a search finds any ASCII text it carries.
    const raw = body.toString(json ? 'utf8' : 'latin1');
    rawBodies.push(raw);
    contentTypes.push(String(req.headers['content-type']));
    if (req.url === '/v1/traces' && json) {
      for (const resourceSpans of JSON.parse(raw).resourceSpans ?? []) {
        const resource = attributesOf(resourceSpans.resource?.attributes);
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, kind: span.kind,
              attributes: attributesOf(span.attributes), resource, status: span.status ?? {},
            });
          }
        }
      }
    }
    res.writeHead(200, { 'Content-Type': json ? 'application/json' : 'application/x-protobuf' });
    res.end(json ? '{}' : '');
  });
  return { endpoint: server.origin, spans, rawBodies, contentTypes, close: () => server.close() };
}

import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { readRawBody, sendJson, startLoopbackServer } from './http-server';

export interface FakeHubspot {
  /** API base, e.g. `http://127.0.0.1:PORT` (the HUBSPOT_API_BASE). */
  url: string;
  /** Stored contacts by lower-cased email: every property ever upserted, including `email`. */
  contacts: Map<string, Record<string, string>>;
  requests: Array<{ method: string; path: string; authorization: string | undefined; traceparent?: string; body: unknown }>;
  /** The next n calls answer 429 (HubSpot's secondly-limit error), with Retry-After when given. */
  rateLimitNext(n: number, retryAfterSeconds?: number): void;
  /** Any Bearer token is accepted except the ones rejected here (answered 401). */
  rejectToken(token: string): void;
  close(): Promise<void>;
}

const UPSERT_PATH = '/crm/v3/objects/contacts/batch/upsert';

interface UpsertInput {
  email: string;
  properties: Record<string, string>;
}

interface StoredContact {
  id: string;
  createdAt: string;
}

function hubspotError(
  res: http.ServerResponse,
  status: number,
  body: Record<string, string>,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, { status: 'error', ...body, correlationId: randomUUID() }, headers);
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => typeof v === 'string')
  );
}

/** Validates `{inputs:[{idProperty:'email', id, properties}]}`; null when malformed. */
function parseUpsertInputs(body: unknown): UpsertInput[] | null {
  const inputs = (body as { inputs?: unknown } | null)?.inputs;
  if (!Array.isArray(inputs) || inputs.length === 0) return null;
  const parsed: UpsertInput[] = [];
  for (const input of inputs as Array<Record<string, unknown>>) {
    if (input?.idProperty !== 'email' || typeof input.id !== 'string' || !isStringRecord(input.properties)) {
      return null;
    }
    parsed.push({ email: input.id.toLowerCase(), properties: input.properties });
  }
  return parsed;
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** A HubSpot CRM stand-in: contacts batch upsert by email, Bearer auth, scripted rate limiting. */
export async function startFakeHubspot(): Promise<FakeHubspot> {
  const contacts = new Map<string, Record<string, string>>();
  const stored = new Map<string, StoredContact>();
  const requests: FakeHubspot['requests'] = [];
  const rateLimits: Array<number | undefined> = [];
  const rejectedTokens = new Set<string>();
  let nextId = 100001;

  function upsert(input: UpsertInput, now: string): Record<string, unknown> {
    const existing = stored.get(input.email);
    const record = existing ?? { id: String(nextId++), createdAt: now };
    stored.set(input.email, record);
    const properties = { ...contacts.get(input.email), ...input.properties, email: input.email };
    contacts.set(input.email, properties);
    return {
      id: record.id,
      properties: {
        ...properties,
        createdate: record.createdAt,
        hs_object_id: record.id,
        lastmodifieddate: now,
      },
      createdAt: record.createdAt,
      updatedAt: now,
      archived: false,
      new: existing === undefined,
    };
  }

  const server = await startLoopbackServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://hubspot.local').pathname;
    const authorization = req.headers.authorization;
    const body = parseJson(await readRawBody(req));
    const traceparent = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
    requests.push({ method: req.method ?? '', path, authorization, traceparent, body });

    const token = /^Bearer (\S+)$/.exec(authorization ?? '')?.[1];
    if (!token || rejectedTokens.has(token)) {
      return hubspotError(res, 401, {
        message: 'Authentication credentials not found.',
        category: 'INVALID_AUTHENTICATION',
      });
    }
    if (rateLimits.length > 0) {
      const retryAfter = rateLimits.shift();
      return hubspotError(
        res,
        429,
        { message: 'You have reached your secondly limit.', errorType: 'RATE_LIMIT', policyName: 'SECONDLY' },
        retryAfter === undefined ? {} : { 'Retry-After': String(retryAfter) },
      );
    }
    if (req.method !== 'POST' || path !== UPSERT_PATH) {
      return hubspotError(res, 404, { message: 'Resource not found', category: 'OBJECT_NOT_FOUND' });
    }
    const inputs = parseUpsertInputs(body);
    if (!inputs) {
      return hubspotError(res, 400, { message: 'Invalid input JSON', category: 'VALIDATION_ERROR' });
    }
    const startedAt = new Date().toISOString();
    const results = inputs.map((input) => upsert(input, startedAt));
    sendJson(res, 200, { status: 'COMPLETE', results, startedAt, completedAt: new Date().toISOString() });
  });

  return {
    url: server.origin,
    contacts,
    requests,
    rateLimitNext(n, retryAfterSeconds) {
      rateLimits.push(...new Array<number | undefined>(n).fill(retryAfterSeconds));
    },
    rejectToken(token) {
      rejectedTokens.add(token);
    },
    close: server.close,
  };
}

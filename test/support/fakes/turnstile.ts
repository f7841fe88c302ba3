import type http from 'node:http';
import { readRawBody, sendJson, startLoopbackServer } from './http-server';

export interface SiteverifyRequest {
  secret: string | undefined;
  response: string | undefined;
  remoteip: string | undefined;
  idempotency_key: string | undefined;
}

export interface FakeTurnstile {
  /** Full siteverify URL (the TURNSTILE_VERIFY_URL). */
  url: string;
  requests: SiteverifyRequest[];
  /** The next n verifications fail: with an HTTP 500, or a 200 whose error code is `internal-error`. */
  failNext(n: number, how: 'http500' | 'internal-error'): void;
  /** While down, connections are dropped without an answer. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

const SITEVERIFY_PATH = '/turnstile/v0/siteverify';
const MAX_TOKEN_LENGTH = 2048;

/** Cloudflare's documented dummy secret keys and the outcome each forces. */
const TEST_SECRETS: Record<string, string | null> = {
  '1x0000000000000000000000000000000AA': null,
  '2x0000000000000000000000000000000AA': 'invalid-input-response',
  '3x0000000000000000000000000000000AA': 'timeout-or-duplicate',
};

function field(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function parseSiteverifyBody(contentType: string, raw: string): SiteverifyRequest | null {
  let values: Record<string, unknown>;
  if (contentType.startsWith('application/json')) {
    try {
      values = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return null;
    }
    if (typeof values !== 'object' || values === null) return null;
  } else if (contentType.startsWith('application/x-www-form-urlencoded')) {
    values = Object.fromEntries(new URLSearchParams(raw));
  } else {
    return null;
  }
  return {
    secret: field(values.secret),
    response: field(values.response),
    remoteip: field(values.remoteip),
    idempotency_key: field(values.idempotency_key),
  };
}

/** The error code Cloudflare would answer with, or null for a pass. */
function verdict(request: SiteverifyRequest): string | null {
  if (!request.secret) return 'missing-input-secret';
  if (!(request.secret in TEST_SECRETS)) return 'invalid-input-secret';
  if (!request.response) return 'missing-input-response';
  if (request.response.length > MAX_TOKEN_LENGTH) return 'invalid-input-response';
  return TEST_SECRETS[request.secret];
}

function sendFailure(res: http.ServerResponse, status: number, code: string): void {
  sendJson(res, status, { success: false, 'error-codes': [code], messages: [] });
}

function sendServerError(res: http.ServerResponse): void {
  res.writeHead(500, { 'Content-Type': 'text/html' });
  res.end('<html><body><h1>500 Internal Server Error</h1></body></html>');
}

function sendSuccess(res: http.ServerResponse): void {
  sendJson(res, 200, {
    success: true,
    challenge_ts: new Date().toISOString(),
    hostname: 'example.com',
    'error-codes': [],
    action: '',
    cdata: '',
    metadata: { interactive: false },
  });
}

/** A Cloudflare Turnstile siteverify stand-in that behaves like the dummy secret keys. */
export async function startFakeTurnstile(): Promise<FakeTurnstile> {
  const requests: SiteverifyRequest[] = [];
  const failures: Array<'http500' | 'internal-error'> = [];

  const server = await startLoopbackServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://turnstile.local').pathname;
    const raw = await readRawBody(req);
    if (path !== SITEVERIFY_PATH) return sendJson(res, 404, { success: false, 'error-codes': ['not-found'] });
    if (req.method !== 'POST') return sendFailure(res, 405, 'method-not-allowed');

    const request = parseSiteverifyBody(req.headers['content-type'] ?? '', raw);
    if (!request) return sendFailure(res, 400, 'bad-request');
    requests.push(request);

    const failure = failures.shift();
    if (failure === 'http500') return sendServerError(res);
    if (failure === 'internal-error') return sendFailure(res, 200, 'internal-error');

    const code = verdict(request);
    if (code) return sendFailure(res, 200, code);
    sendSuccess(res);
  });

  return {
    url: `${server.origin}${SITEVERIFY_PATH}`,
    requests,
    failNext(n, how) {
      failures.push(...new Array<typeof how>(n).fill(how));
    },
    setDown: server.setDown,
    close: server.close,
  };
}

import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import fetch, { type Response } from 'node-fetch';
import { isForbiddenAddress } from './net-policy';

export type OutboundErrorKind = 'timeout' | 'connection' | 'forbidden' | 'invalid_url' | 'unresolvable';

export class OutboundError extends Error {
  override name = 'OutboundError';

  constructor(
    public readonly kind: OutboundErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  /** Default 64 KiB. */
  maxResponseBytes?: number;
  allowPrivate: boolean;
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  /** At most maxResponseBytes of the body, decoded as UTF-8. */
  body: string;
  truncated: boolean;
  durationMs: number;
}

const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;
const DNS_TIMEOUT_MS = 5_000;
/** Below the usual 5 s server keep-alive, so an idle socket is dropped by us before the server closes it. */
const IDLE_SOCKET_TIMEOUT_MS = 4_000;
/** Set on the error our lookup raises, so it can be recognised after node-fetch wraps it. */
const FORBIDDEN_CODE = 'EFORBIDDENADDRESS';

interface Policy {
  allowPrivate: boolean;
}

/** Parses the URL and applies the scheme rule: https, or http only when private targets are allowed. */
function parseTarget(rawUrl: string, policy: Policy): URL {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new OutboundError('invalid_url', 'URL is not valid');
  }
  const allowed = policy.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol)) {
    throw new OutboundError('invalid_url', `URL scheme must be ${allowed.map((p) => p.slice(0, -1)).join(' or ')}`);
  }
  return url;
}

/** The host as an IP address when it is a literal (IPv6 without brackets), else null. */
function literalAddress(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) ? host : null;
}

// Messages never carry the address a host resolved to nor the socket error: they reach API
// clients and delivery logs, and would map internal networks for whoever picks the URL.
function forbidden(): OutboundError {
  return new OutboundError('forbidden', 'target address is not allowed');
}

function assertLiteralAllowed(url: URL, policy: Policy): void {
  const literal = literalAddress(url);
  if (literal && isForbiddenAddress(literal, policy)) throw forbidden();
}

function anyForbidden(addresses: dns.LookupAddress[], policy: Policy): boolean {
  return addresses.some((a) => isForbiddenAddress(a.address, policy));
}

async function resolveAll(hostname: string): Promise<dns.LookupAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new OutboundError('timeout', 'host lookup timed out')), DNS_TIMEOUT_MS);
  });
  try {
    return await Promise.race([dns.promises.lookup(hostname, { all: true, verbatim: true }), timeout]);
  } catch (err) {
    if (err instanceof OutboundError) throw err;
    throw new OutboundError('unresolvable', 'host does not resolve');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Validates a target when it is configured (webhook create/update). Every resolved address must be
 * allowed; outboundFetch checks again on the address it actually connects to.
 */
export async function assertSafeTarget(url: string, opts: { allowPrivate: boolean }): Promise<void> {
  const target = parseTarget(url, opts);
  if (literalAddress(target)) return assertLiteralAllowed(target, opts);
  if (anyForbidden(await resolveAll(target.hostname), opts)) throw forbidden();
}

/** A dns.lookup that refuses to hand out forbidden addresses, so the socket never connects to one. */
function guardedLookup(policy: Policy): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      if (anyForbidden(addresses, policy)) return callback(Object.assign(forbidden(), { code: FORBIDDEN_CODE }), '', 0);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

interface AgentPair {
  http: http.Agent;
  https: https.Agent;
}

const agents = new Map<boolean, AgentPair>();

function agentsFor(policy: Policy): AgentPair {
  let pair = agents.get(policy.allowPrivate);
  if (!pair) {
    const options = { keepAlive: true, timeout: IDLE_SOCKET_TIMEOUT_MS, lookup: guardedLookup(policy) };
    pair = { http: new http.Agent(options), https: new https.Agent(options) };
    agents.set(policy.allowPrivate, pair);
  }
  return pair;
}

function flattenHeaders(response: Response): Record<string, string> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return headers;
}

/**
 * Reads at most maxBytes of the body. When more arrives, stops reading and aborts the exchange so the
 * rest is never downloaded.
 */
async function readCapped(
  body: Readable,
  maxBytes: number,
  abort: () => void,
): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    if (size + buf.length > maxBytes) {
      chunks.push(buf.subarray(0, maxBytes - size));
      // node-fetch emits an AbortError on the body when aborted; nobody is reading it any more.
      body.on('error', () => undefined);
      abort();
      return { text: Buffer.concat(chunks).toString('utf8'), truncated: true };
    }
    chunks.push(buf);
    size += buf.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
}

function toOutboundError(err: unknown, timedOut: boolean): OutboundError {
  if (err instanceof OutboundError) return err;
  if (timedOut) return new OutboundError('timeout', 'request timed out');
  if ((err as { code?: string }).code === FORBIDDEN_CODE) {
    return forbidden();
  }
  return new OutboundError('connection', 'connection failed');
}

/**
 * The single way the service calls anything outside. Redirects are returned, never followed; the
 * timeout covers connecting, the response headers and reading the body.
 */
export async function outboundFetch(url: string, req: OutboundRequest): Promise<OutboundResponse> {
  const policy = { allowPrivate: req.allowPrivate };
  const target = parseTarget(url, policy);
  // Node does not call `lookup` for IP literals, so they are checked here.
  assertLiteralAllowed(target, policy);

  const started = performance.now();
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, req.timeoutMs);
  const pair = agentsFor(policy);

  try {
    const response = await fetch(target.toString(), {
      method: req.method ?? 'GET',
      headers: req.headers,
      body: req.body,
      redirect: 'manual',
      signal: controller.signal,
      agent: (parsed) => (parsed.protocol === 'http:' ? pair.http : pair.https),
    });
    const { text, truncated } = await readCapped(
      response.body as unknown as Readable,
      req.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      () => controller.abort(),
    );
    return {
      status: response.status,
      headers: flattenHeaders(response),
      body: text,
      truncated,
      durationMs: Math.round(performance.now() - started),
    };
  } catch (err) {
    throw toOutboundError(err, timedOut);
  } finally {
    clearTimeout(timer);
  }
}

import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { readRawBody, sendJson, startLoopbackServer } from './http-server';
import { STRIPE_JS_STAND_IN } from './stripe-js';

export interface FakeStripeCall {
  method: string;
  path: string;
  /** The form-encoded body (or query) decoded into Stripe's nested parameters. */
  params: Record<string, any>;
  idempotencyKey: string | undefined;
}

export interface FakeRefund {
  id: string;
  paymentIntent: string;
  amount: number;
  idempotencyKey: string | undefined;
}

export interface FakeStripe {
  /** API base, e.g. `http://127.0.0.1:PORT` (the STRIPE_API_BASE); also serves the Stripe.js stand-in. */
  url: string;
  secretKey: string;
  publishableKey: string;
  /** Where the Stripe.js stand-in is served (the STRIPE_JS_URL of a test). */
  jsUrl: string;
  addIntent(p: { id?: string; amount: number; currency: string; status?: string; metadata?: Record<string, string> }): string;
  intent(id: string): Record<string, any> | undefined;
  /** Moves an intent as a person paying it would (e.g. to `succeeded`). */
  setIntentStatus(id: string, status: string): void;
  requests: Array<{ method: string; path: string; authorization: string | undefined }>;
  calls: FakeStripeCall[];
  /** Refunds made (an idempotent replay makes none). */
  refunds: FakeRefund[];
  /** While down, connections are dropped without an answer. */
  setDown(down: boolean): void;
  /** Drops the connections of the requests the predicate picks (null: none), e.g. only refunds. */
  setFailing(predicate: ((method: string, path: string) => boolean) | null): void;
  close(): Promise<void>;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function stripeId(prefix: string): string {
  const chars = [...randomBytes(24)].map((b) => ALPHANUMERIC[b % ALPHANUMERIC.length]);
  return `${prefix}_${chars.join('')}`;
}

function paymentIntent(p: { id: string; amount: number; currency: string; status: string; metadata?: Record<string, string> }): Record<string, any> {
  const succeeded = p.status === 'succeeded';
  return {
    id: p.id,
    object: 'payment_intent',
    amount: p.amount,
    amount_capturable: p.status === 'requires_capture' ? p.amount : 0,
    amount_details: { tip: {} },
    amount_received: succeeded ? p.amount : 0,
    application: null,
    application_fee_amount: null,
    automatic_payment_methods: { allow_redirects: 'always', enabled: true },
    canceled_at: null,
    cancellation_reason: null,
    capture_method: 'automatic_async',
    client_secret: `${p.id}_secret_${stripeId('x').slice(2)}`,
    confirmation_method: 'automatic',
    created: Math.floor(Date.now() / 1000),
    currency: p.currency,
    customer: null,
    description: null,
    last_payment_error: null,
    latest_charge: succeeded ? stripeId('ch') : null,
    livemode: false,
    metadata: p.metadata ?? {},
    next_action: null,
    on_behalf_of: null,
    payment_method: succeeded ? stripeId('pm') : null,
    payment_method_configuration_details: null,
    payment_method_options: {},
    payment_method_types: ['card'],
    processing: null,
    receipt_email: null,
    review: null,
    setup_future_usage: null,
    shipping: null,
    source: null,
    statement_descriptor: null,
    statement_descriptor_suffix: null,
    status: p.status,
    transfer_data: null,
    transfer_group: null,
  };
}

function sendStripeError(res: http.ServerResponse, status: number, error: Record<string, string>): void {
  sendJson(res, status, { error }, { 'Request-Id': stripeId('req') });
}

function unauthorized(res: http.ServerResponse, authorization: string | undefined): void {
  const message = authorization
    ? 'Invalid API Key provided: ' + authorization.replace(/^Bearer\s+/i, '').replace(/.(?=.{4})/g, '*')
    : 'You did not provide an API key. You need to provide your API key in the Authorization header, ' +
      "using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').";
  sendStripeError(res, 401, { message, type: 'invalid_request_error' });
}

/**
 * Parses `a[b][c]=1&list[0]=x` as Stripe does: nested objects, values as strings. */
export function parseStripeForm(text: string): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const path = name.replace(/\]/g, '').split('[');
    let node = out;
    path.forEach((key, i) => {
      if (i === path.length - 1) node[key] = value;
      else node = (node[key] ??= {});
    });
  }
  return out;
}

/** Stripe's test cards (https://docs.stripe.com/testing) the fake knows. */
export const TEST_CARDS = {
  good: '4242424242424242',
  declined: '4000000000000002',
  threeDSecure: '4000002760003184',
} as const;

const DECLINED = {
  code: 'card_declined',
  decline_code: 'generic_decline',
  doc_url: 'https://stripe.com/docs/error-codes/card-declined',
  message: 'Your card was declined.',
  type: 'card_error',
};

const AUTHENTICATION_FAILED = {
  code: 'payment_intent_authentication_failure',
  doc_url: 'https://stripe.com/docs/error-codes/payment-intent-authentication-failure',
  message: 'We are unable to authenticate your payment method. Please choose a different payment method and try again.',
  type: 'invalid_request_error',
};

const CORS = { 'Access-Control-Allow-Origin': '*' };

function missing(res: http.ServerResponse, param: string): void {
  sendStripeError(res, 400, {
    code: 'parameter_missing',
    doc_url: 'https://stripe.com/docs/error-codes/parameter-missing',
    message: `Missing required param: ${param}.`,
    param,
    type: 'invalid_request_error',
  });
}

function noSuchIntent(res: http.ServerResponse, id: string, headers: Record<string, string> = {}): void {
  sendJson(res, 404, {
    error: {
      code: 'resource_missing',
      doc_url: 'https://stripe.com/docs/error-codes/resource-missing',
      message: `No such payment_intent: '${id}'`,
      param: 'intent',
      type: 'invalid_request_error',
    },
  }, { 'Request-Id': stripeId('req'), ...headers });
}

/**
 * A Stripe API stand-in on loopback. Secret-key calls (Bearer): create, retrieve and cancel
 * PaymentIntents, create refunds (with Idempotency-Key replay). Publishable-key calls (`key` and
 * the intent's `client_secret`, as Stripe.js makes them, with CORS): retrieve and confirm, where the
 * card number picks the outcome (TEST_CARDS). `/v3/` serves a Stripe.js stand-in and `/3ds/...` a
 * stand-in for the bank's authentication page a 3-D Secure payment redirects to.
 */
export async function startFakeStripe(): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const publishableKey = `pk_test_${randomBytes(12).toString('hex')}`;
  const intents = new Map<string, Record<string, any>>();
  const requests: FakeStripe['requests'] = [];
  const calls: FakeStripeCall[] = [];
  const refunds: FakeRefund[] = [];
  const idempotent = new Map<string, { params: string; status: number; body: unknown }>();
  let origin = '';
  let failing: ((method: string, path: string) => boolean) | null = null;

  const ok = (res: http.ServerResponse, body: unknown, headers: Record<string, string> = {}) =>
    sendJson(res, 200, body, { 'Request-Id': stripeId('req'), 'Stripe-Version': '2024-06-20', ...headers });

  /** Publishable-key access to one intent, as Stripe.js has it: the key and the intent's client secret. */
  const browserIntent = (res: http.ServerResponse, id: string, params: Record<string, any>) => {
    const intent = intents.get(id);
    if (params.key !== publishableKey) {
      sendJson(res, 401, { error: { message: 'Invalid API Key provided: ' + String(params.key ?? '').replace(/.(?=.{4})/g, '*'), type: 'invalid_request_error' } }, CORS);
      return null;
    }
    if (!intent || params.client_secret !== intent.client_secret) {
      noSuchIntent(res, id, CORS);
      return null;
    }
    return intent;
  };

  const confirm = (res: http.ServerResponse, intent: Record<string, any>, params: Record<string, any>) => {
    if (!['requires_payment_method', 'requires_confirmation'].includes(intent.status)) {
      return sendJson(res, 400, { error: {
        code: 'payment_intent_unexpected_state',
        message: `You cannot confirm this PaymentIntent because it has a status of ${intent.status}.`,
        type: 'invalid_request_error',
      } }, CORS);
    }
    const card = String(params.payment_method_data?.card?.number ?? '').replace(/\s/g, '');
    const paymentMethod = stripeId('pm');
    if (card === TEST_CARDS.declined) {
      intent.status = 'requires_payment_method';
      intent.last_payment_error = { ...DECLINED, payment_method: { id: paymentMethod, object: 'payment_method', type: 'card' } };
      return sendJson(res, 402, { error: { ...DECLINED, payment_intent: intent } }, CORS);
    }
    intent.payment_method = paymentMethod;
    intent.last_payment_error = null;
    if (card === TEST_CARDS.threeDSecure) {
      const returnUrl = String(params.return_url ?? '');
      if (!returnUrl) return missing(res, 'return_url');
      intent.status = 'requires_action';
      intent.next_action = {
        type: 'redirect_to_url',
        redirect_to_url: { url: `${origin}/3ds/authorize?payment_intent=${intent.id}`, return_url: returnUrl },
      };
      return sendJson(res, 200, intent, CORS);
    }
    if (card !== TEST_CARDS.good) {
      return sendJson(res, 402, { error: {
        code: 'incorrect_number', doc_url: 'https://stripe.com/docs/error-codes/incorrect-number',
        message: 'Your card number is incorrect.', param: 'number', type: 'card_error',
      } }, CORS);
    }
    succeed(intent);
    sendJson(res, 200, intent, CORS);
  };

  const succeed = (intent: Record<string, any>) => {
    intent.status = 'succeeded';
    intent.amount_received = intent.amount;
    intent.latest_charge = stripeId('ch');
    intent.next_action = null;
  };

  const refund = (res: http.ServerResponse, params: Record<string, any>, idempotencyKey: string | undefined) => {
    const id = params.payment_intent;
    if (!id) return missing(res, 'payment_intent');
    const intent = intents.get(id);
    if (!intent) return noSuchIntent(res, id);
    if (intent.status !== 'succeeded') {
      return sendStripeError(res, 400, {
        code: 'payment_intent_unexpected_state',
        message: `This PaymentIntent (${id}) does not have a successful charge to refund.`,
        type: 'invalid_request_error',
      });
    }
    if (intent.refunded) {
      return sendStripeError(res, 400, {
        code: 'charge_already_refunded',
        doc_url: 'https://stripe.com/docs/error-codes/charge-already-refunded',
        message: `Charge ${intent.latest_charge} has already been refunded.`,
        type: 'invalid_request_error',
      });
    }
    intent.refunded = true;
    const made: FakeRefund = { id: stripeId('re'), paymentIntent: id, amount: intent.amount, idempotencyKey };
    refunds.push(made);
    ok(res, {
      id: made.id, object: 'refund', amount: intent.amount, balance_transaction: stripeId('txn'), charge: intent.latest_charge,
      created: Math.floor(Date.now() / 1000), currency: intent.currency, destination_details: null,
      metadata: params.metadata ?? {}, payment_intent: id, reason: params.reason ?? null, receipt_number: null,
      source_transfer_reversal: null, status: 'succeeded', transfer_reversal: null,
    });
  };

  const server = await startLoopbackServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://stripe.local');
    const path = url.pathname;
    const method = req.method ?? '';
    const authorization = req.headers.authorization;
    requests.push({ method, path, authorization });
    const raw = method === 'POST' ? await readRawBody(req) : (req.resume(), url.search.slice(1));
    if (method === 'POST' && raw && !String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
      return sendStripeError(res, 400, { message: 'Invalid request: Stripe takes application/x-www-form-urlencoded bodies.', type: 'invalid_request_error' });
    }
    const params = parseStripeForm(raw);
    const idempotencyKey = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
    calls.push({ method, path, params, idempotencyKey });
    if (failing?.(method, path)) {
      req.socket.destroy();
      return;
    }

    if (method === 'GET' && path === '/v3/') {
      res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', ...CORS });
      res.end(STRIPE_JS_STAND_IN);
      return;
    }
    if (method === 'GET' && path === '/3ds/authorize') return authorizePage(res, url.searchParams.get('payment_intent') ?? '');
    if (method === 'POST' && path === '/3ds/complete') {
      const intent = intents.get(params.payment_intent);
      const returnUrl = intent?.next_action?.redirect_to_url?.return_url;
      if (!intent || intent.status !== 'requires_action' || !returnUrl) return noSuchIntent(res, String(params.payment_intent));
      const passed = params.result === 'succeeded';
      if (passed) succeed(intent);
      else Object.assign(intent, { status: 'requires_payment_method', next_action: null, last_payment_error: AUTHENTICATION_FAILED });
      const back = new URL(returnUrl);
      back.searchParams.set('payment_intent', intent.id);
      back.searchParams.set('payment_intent_client_secret', intent.client_secret);
      back.searchParams.set('redirect_status', passed ? 'succeeded' : 'failed');
      res.writeHead(303, { Location: back.toString() });
      res.end();
      return;
    }

    const browser = /^\/v1\/payment_intents\/([^/]+)(\/confirm)?$/.exec(path);
    if (browser && params.key !== undefined) {
      const intent = browserIntent(res, decodeURIComponent(browser[1]), params);
      if (!intent) return;
      if (method === 'GET' && !browser[2]) return sendJson(res, 200, intent, CORS);
      if (method === 'POST' && browser[2]) return confirm(res, intent, params);
    }

    if (authorization !== `Bearer ${secretKey}`) return unauthorized(res, authorization);

    if (idempotencyKey && method === 'POST') {
      const seen = idempotent.get(idempotencyKey);
      if (seen && seen.params !== `${path}?${JSON.stringify(params)}`) {
        return sendStripeError(res, 400, {
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
          type: 'idempotency_error',
        });
      }
      if (seen) return sendJson(res, seen.status, seen.body, { 'Idempotent-Replayed': 'true', 'Request-Id': stripeId('req') });
      // Keep what this request answers, so a retry with the key gets the same answer and makes nothing.
      const writeHead = res.writeHead.bind(res);
      const end = res.end.bind(res);
      let status = 200;
      (res as any).writeHead = (code: number, ...rest: any[]) => { status = code; return writeHead(code, ...rest); };
      (res as any).end = (chunk?: any, ...rest: any[]) => {
        if (chunk && status < 500) idempotent.set(idempotencyKey, { params: `${path}?${JSON.stringify(params)}`, status, body: JSON.parse(String(chunk)) });
        return end(chunk, ...rest);
      };
    }

    if (method === 'POST' && path === '/v1/payment_intents') {
      const amount = Number(params.amount);
      if (params.amount === undefined) return missing(res, 'amount');
      if (!params.currency) return missing(res, 'currency');
      if (!Number.isInteger(amount) || amount < 50) {
        return sendStripeError(res, 400, {
          code: 'amount_too_small', doc_url: 'https://stripe.com/docs/error-codes/amount-too-small',
          message: 'Amount must be at least 50 cents', param: 'amount', type: 'invalid_request_error',
        });
      }
      const intent = paymentIntent({ id: stripeId('pi'), amount, currency: String(params.currency), status: 'requires_payment_method', metadata: params.metadata });
      intent.automatic_payment_methods = { allow_redirects: 'always', enabled: params.automatic_payment_methods?.enabled === 'true' };
      intents.set(intent.id, intent);
      return ok(res, intent);
    }
    const match = /^\/v1\/payment_intents\/([^/]+)(\/cancel)?$/.exec(path);
    if (method === 'GET' && match && !match[2]) {
      const intent = intents.get(decodeURIComponent(match[1]));
      return intent ? ok(res, intent) : noSuchIntent(res, decodeURIComponent(match[1]));
    }
    if (method === 'POST' && match && match[2]) {
      const intent = intents.get(decodeURIComponent(match[1]));
      if (!intent) return noSuchIntent(res, decodeURIComponent(match[1]));
      if (!['requires_payment_method', 'requires_capture', 'requires_confirmation', 'requires_action', 'processing'].includes(intent.status)) {
        return sendStripeError(res, 400, {
          code: 'payment_intent_unexpected_state',
          message: `You cannot cancel this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be canceled: requires_payment_method, requires_capture, requires_confirmation, requires_action, processing.`,
          type: 'invalid_request_error',
        });
      }
      Object.assign(intent, { status: 'canceled', canceled_at: Math.floor(Date.now() / 1000), cancellation_reason: params.cancellation_reason ?? null });
      return ok(res, intent);
    }
    if (method === 'POST' && path === '/v1/refunds') return refund(res, params, idempotencyKey);
    return sendStripeError(res, 404, {
      message: `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
      type: 'invalid_request_error',
    });
  });
  origin = server.origin;

  function authorizePage(res: http.ServerResponse, id: string): void {
    const html = `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>3D Secure test page</title></head>
<body style="font-family: sans-serif; padding: 1rem"><h1>3D Secure 2 test page</h1>
<p>This is a stand-in for your bank's authentication page.</p>
<form method="post" action="/3ds/complete"><input type="hidden" name="payment_intent" value="${id.replace(/[^A-Za-z0-9_]/g, '')}">
<button name="result" value="succeeded">Complete authentication</button>
<button name="result" value="failed">Fail authentication</button></form></body></html>`;
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(html);
  }

  return {
    url: server.origin,
    secretKey,
    publishableKey,
    jsUrl: `${server.origin}/v3/`,
    requests,
    calls,
    refunds,
    addIntent({ id = stripeId('pi'), amount, currency, status = 'succeeded', metadata }) {
      intents.set(id, paymentIntent({ id, amount, currency, status, metadata }));
      return id;
    },
    intent: (id) => intents.get(id),
    setIntentStatus(id, status) {
      const intent = intents.get(id);
      if (!intent) throw new Error(`no intent ${id}`);
      if (status === 'succeeded') succeed(intent);
      else intent.status = status;
    },
    setDown: server.setDown,
    setFailing(predicate) {
      failing = predicate;
    },
    close: server.close,
  };
}

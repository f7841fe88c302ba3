import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { sendJson, startLoopbackServer } from './http-server';

export interface FakeStripe {
  /** API base, e.g. `http://127.0.0.1:PORT` (the STRIPE_API_BASE). */
  url: string;
  secretKey: string;
  addIntent(p: { id?: string; amount: number; currency: string; status?: string }): string;
  requests: Array<{ method: string; path: string; authorization: string | undefined }>;
  /** While down, connections are dropped without an answer. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function stripeId(prefix: string): string {
  const chars = [...randomBytes(24)].map((b) => ALPHANUMERIC[b % ALPHANUMERIC.length]);
  return `${prefix}_${chars.join('')}`;
}

function paymentIntent(p: { id: string; amount: number; currency: string; status: string }): Record<string, unknown> {
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
    metadata: {},
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

/** A Stripe API stand-in: `GET /v1/payment_intents/:id` with Bearer secret-key auth. */
export async function startFakeStripe(): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(12).toString('hex')}`;
  const intents = new Map<string, Record<string, unknown>>();
  const requests: FakeStripe['requests'] = [];

  const server = await startLoopbackServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://stripe.local').pathname;
    const authorization = req.headers.authorization;
    requests.push({ method: req.method ?? '', path, authorization });
    req.resume();

    if (authorization !== `Bearer ${secretKey}`) return unauthorized(res, authorization);
    const match = /^\/v1\/payment_intents\/([^/]+)$/.exec(path);
    if (req.method !== 'GET' || !match) {
      return sendStripeError(res, 404, {
        message: `Unrecognized request URL (${req.method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
        type: 'invalid_request_error',
      });
    }
    const id = decodeURIComponent(match[1]);
    const intent = intents.get(id);
    if (!intent) {
      return sendStripeError(res, 404, {
        code: 'resource_missing',
        doc_url: 'https://stripe.com/docs/error-codes/resource-missing',
        message: `No such payment_intent: '${id}'`,
        param: 'intent',
        type: 'invalid_request_error',
      });
    }
    sendJson(res, 200, intent, { 'Request-Id': stripeId('req'), 'Stripe-Version': '2024-06-20' });
  });

  return {
    url: server.origin,
    secretKey,
    requests,
    addIntent({ id = stripeId('pi'), amount, currency, status = 'succeeded' }) {
      intents.set(id, paymentIntent({ id, amount, currency, status }));
      return id;
    },
    setDown: server.setDown,
    close: server.close,
  };
}

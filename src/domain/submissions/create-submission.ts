import { createHash } from 'node:crypto';
import Joi from 'joi';
import type { AppContext } from '../../app';
import { newId } from '../../lib/ids';
import { metrics } from '../../lib/metrics';
import { jobIds } from '../../queues/catalogue';
import type { CachedForm } from '../forms/form-cache';
import type { Field } from '../forms/types';
import { quotaMonth } from '../quotas/quota';
import type { SubmissionSource } from './entities';
import { PaymentBackendUnavailable, verifyPaymentIntent } from './payments';
import { sealValue } from './sealed-values';
import { submitterDetailsToStore } from './submitter';
import { findIdempotencyRecord, insertSubmission } from './store';
import { validateSubmission, type FieldError } from './validate';

export interface SubmissionRequest {
  /** The organization the caller acts for; public requests take the form's. */
  organizationId: string | null;
  formId: string;
  data: unknown;
  submitterEmail: string | null;
  submitterName: string | null;
  source: SubmissionSource;
  idempotencyKey?: string | null;
  /** The whole request body, for the idempotency fingerprint. */
  requestBody?: unknown;
  /** Problems with the request's own metadata (e.g. submitterEmail), reported with field errors. */
  metadataErrors?: FieldError[];
}

export interface CreatedSubmission {
  id: string;
  formId: string;
  createdAt: string;
}

/** Why a submission was refused; each HTTP surface renders these in its own error shape. */
export type SubmissionRefusal =
  | { kind: 'not_found' }
  | { kind: 'not_published' }
  | { kind: 'invalid_data' }
  | { kind: 'missing_required'; fields: Field[] }
  | { kind: 'invalid_fields'; errors: FieldError[] }
  | { kind: 'quota_exceeded' }
  | { kind: 'payment_used' }
  | { kind: 'payment_unavailable'; message: string }
  | { kind: 'idempotency_key_reused' };

export type SubmissionResult =
  | { ok: true; submission: CreatedSubmission; replayed: boolean }
  | { ok: false; refusal: SubmissionRefusal };

const refuse = (refusal: SubmissionRefusal): SubmissionResult => ({ ok: false, refusal });

const submitterSchema = Joi.object({
  submitterEmail: Joi.string().email({ tlds: false }).max(320).allow(null),
  submitterName: Joi.string().max(500).allow(null),
});

/** submitterEmail/submitterName problems, reported beside the field errors (field = property name). */
export function submitterErrors(submitterEmail: unknown, submitterName: unknown): FieldError[] {
  const { error } = submitterSchema.validate({ submitterEmail, submitterName }, { abortEarly: false });
  return (error?.details ?? []).map((d) => ({ field: String(d.path[0]), message: d.message.replace(/"/g, '') }));
}

/** Key order does not change what a body means, so it does not change its fingerprint. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as any)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function requestFingerprint(formId: string, body: unknown): string {
  return createHash('sha256').update(`${formId}\n${canonicalJson(body)}`).digest('hex');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sensitive values are sealed before they are stored; reads show `Redacted`. */
function sealSensitive(form: CachedForm, values: Record<string, unknown>, key: Buffer): Record<string, unknown> {
  const out = { ...values };
  for (const field of form.structure.fields) {
    if (field.config?.sensitive === true && field.id in out) out[field.id] = sealValue(out[field.id], key);
  }
  return out;
}

async function checkPayment(app: AppContext, form: CachedForm, values: Record<string, unknown>)
  : Promise<{ intentId: string | null; refusal?: SubmissionRefusal }> {
  const field = form.structure.fields.find((f) => f.type === 'payment' && typeof values[f.id] === 'string');
  if (!field) return { intentId: null };
  const intentId = values[field.id] as string;
  try {
    const problem = await verifyPaymentIntent(
      { apiBase: app.config.stripeApiBase, secretKey: app.config.stripeSecretKey, timeoutMs: 10_000 },
      intentId, { amount: field.config.amount, currency: field.config.currency },
    );
    if (problem) return { intentId, refusal: { kind: 'invalid_fields', errors: [{ field: field.id, message: problem }] } };
  } catch (err) {
    if (err instanceof PaymentBackendUnavailable) return { intentId, refusal: { kind: 'payment_unavailable', message: err.message } };
    throw err;
  }
  return { intentId };
}

/**
 * The one submission flow for the API and the public runtime, in CONTRACT §11's order:
 * 404 → not published → invalid data → missing required → field validation → payment → quota → claim.
 */
export async function createSubmission(app: AppContext, request: SubmissionRequest): Promise<SubmissionResult> {
  const idem = request.idempotencyKey && request.organizationId
    ? { key: request.idempotencyKey, requestHash: requestFingerprint(request.formId, request.requestBody) }
    : null;
  if (idem) {
    const stored = await findIdempotencyRecord(app.orm, request.organizationId!, idem.key);
    if (stored) return replay(stored, idem.requestHash);
  }

  for (let attempt = 0; attempt < 3; attempt++) {
    const form = await app.formCache.get(request.formId, attempt > 0);
    if (!form || (request.organizationId && form.organizationId !== request.organizationId)) return refuse({ kind: 'not_found' });
    if (form.status !== 'published') return refuse({ kind: 'not_published' });
    if (!isPlainObject(request.data)) return refuse({ kind: 'invalid_data' });

    const check = validateSubmission(form.structure, request.data);
    if (check.missingRequired.length) return refuse({ kind: 'missing_required', fields: check.missingRequired });
    const fieldErrors = [...check.errors, ...(request.metadataErrors ?? [])];
    if (fieldErrors.length) return refuse({ kind: 'invalid_fields', errors: fieldErrors });

    const payment = await checkPayment(app, form, check.values);
    if (payment.refusal) return refuse(payment.refusal);

    const submitter = submitterDetailsToStore(form.structure.fields, check.values, request);
    const createdAt = new Date();
    const submission: CreatedSubmission = { id: newId('sub'), formId: form.id, createdAt: createdAt.toISOString() };
    const outcome = await insertSubmission(app.orm, {
      id: submission.id, organizationId: form.organizationId, formId: form.id, formUpdatedAt: form.updatedAt,
      month: quotaMonth(createdAt), data: sealSensitive(form, check.values, app.encryptionKey),
      submitterEmail: submitter.submitterEmail, submitterName: submitter.submitterName, source: request.source,
      createdAt, paymentIntentId: payment.intentId,
      idempotency: idem ? { ...idem, responseBody: { submission } } : null,
    });
    switch (outcome.kind) {
      case 'created':
        metrics.submissions.inc({ source: request.source });
        enqueueFanout(app, submission.id, outcome.outboxId);
        return { ok: true, submission, replayed: false };
      case 'quota_exceeded':
        metrics.quotaRejections.inc();
        return refuse({ kind: 'quota_exceeded' });
      case 'payment_used':
        return refuse({ kind: 'payment_used' });
      case 'idempotency_conflict': {
        const stored = await findIdempotencyRecord(app.orm, request.organizationId!, idem!.key);
        if (stored) return replay(stored, idem!.requestHash);
        continue;
      }
      case 'form_changed':
        continue; // the cached form is stale: reload it and decide again
    }
  }
  throw new Error('form kept changing while the submission was being stored');
}

function replay(stored: { requestHash: string; body: unknown }, requestHash: string): SubmissionResult {
  if (stored.requestHash !== requestHash) return refuse({ kind: 'idempotency_key_reused' });
  return { ok: true, submission: (stored.body as { submission: CreatedSubmission }).submission, replayed: true };
}

/** After commit; when Redis is down the outbox relay sends it later, so a failure here is not an error. */
function enqueueFanout(app: AppContext, submissionId: string, outboxId: string): void {
  app.producer.addSoon('submissions', 'fanout', { submissionId, outboxId }, { jobId: jobIds.fanout(submissionId) })
    .catch((err) => app.logger.debug({ err: err.message, submissionId }, 'enqueue deferred to the outbox relay'));
}

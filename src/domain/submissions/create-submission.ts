import { createHash } from 'node:crypto';
import { isEmailValid } from '@hapi/address';
import Joi from 'joi';
import type { Config } from '../../../config';
import type { Em, Orm } from '../../db/orm';
import { newTimeOrderedId } from '../../lib/ids';
import type { Logger } from '../../lib/logger';
import { metrics } from '../../lib/metrics';
import { isPlainObject } from '../../lib/objects';
import { annotate } from '../../lib/tracing';
import type { Producer } from '../../queues/producer';
import type { CachedForm, FormCache } from '../forms/form-cache';
import type { Field } from '../forms/types';
import { quotaMonthOfIso } from '../quotas/quota';
import type { SubmissionSource } from './entities';
import { PaymentBackendUnavailable, verifyPaymentIntent } from './payments';
import { sealValue } from './sealed-values';
import { submitterDetailsToStore } from './submitter';
import { createdFanout } from './fanout';
import { checkUploads, uploadRefs, type Files, type UploadRef } from '../files/uploads';
import { claimedUploads, type UploadRow } from '../files/store';
import { claimIdempotencyKey, findIdempotencyRecord, releaseIdempotencyKey, type StoredIdempotency } from './idempotency-records';
import type { ClaimKind, CreatedFanout, InsertOutcome, SubmissionRow } from './storing-statement';
import type { Settled, SubmissionWriter } from './submission-writer';
import { validateSubmission, type FieldError } from './validate';

/** What storing a submission uses: the database, the form cache, the key sealing values, the queues. */
export interface SubmissionDeps {
  orm: Orm;
  /** Stores the single submissions of concurrent requests together. */
  submissionWriter: SubmissionWriter;
  config: Readonly<Config>;
  logger: Logger;
  producer: Producer;
  formCache: FormCache;
  encryptionKey: Buffer;
  /** Where uploaded files live, and their links. */
  files: Files;
}

export interface SubmissionRequest {
  /** The organization the caller acts for; public requests take the form's. */
  organizationId: string | null;
  formId: string;
  data: unknown;
  submitterEmail: string | null;
  submitterName: string | null;
  source: SubmissionSource;
  /** See SubmissionInput. */
  language?: string | null;
  idempotencyKey?: string | null;
  /** The whole request body, for the idempotency fingerprint. */
  requestBody?: unknown;
  /** Problems with the request's own metadata (e.g. submitterEmail), reported with field errors. */
  metadataErrors?: FieldError[];
  /** The form version the answers were given to (the public runtime's `formVersion`); absent: not said. */
  formVersion?: number | null;
}

export interface CreatedSubmission {
  id: string;
  formId: string;
  /**
   * The version of the form it was validated against and stored under; null only in the replay of
   * an answer kept before versions were recorded (replayedSubmission).
   */
  formVersion: number | null;
  createdAt: string;
}

/**
 * A kept answer as it replays: one kept before versions were recorded (or by the previous release
 * during an upgrade) has no `formVersion`, and replays it as null, which openapi.yaml allows.
 */
export function replayedSubmission(stored: CreatedSubmission): CreatedSubmission {
  return { ...stored, formVersion: stored.formVersion ?? null };
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
  | { kind: 'idempotency_key_reused' }
  /** The first request with this Idempotency-Key is still running. */
  | { kind: 'idempotency_key_in_use' }
  /** Answers given to an earlier version of the form that the current version does not accept. */
  | { kind: 'form_changed'; form: CachedForm };

export type SubmissionResult =
  | { ok: true; submission: CreatedSubmission; replayed: boolean }
  | { ok: false; refusal: SubmissionRefusal };

const refuse = (refusal: SubmissionRefusal): SubmissionResult => ({ ok: false, refusal });

/** Checked one by one, and only when present: an object schema around them cost as much again. */
const submitterSchemas = [
  ['submitterEmail', Joi.string().email({ tlds: false }).max(320).allow(null).label('submitterEmail')],
  ['submitterName', Joi.string().max(500).allow(null).label('submitterName')],
] as const;

// What joi's email rule hands isEmailValid for `tlds: false` (its types only name the object forms).
const JOI_EMAIL_OPTIONS = { tlds: false } as unknown as Parameters<typeof isEmailValid>[1];

/**
 * Whether joi would accept the value without a word: the schemas' own tests (null, or a non-empty
 * string within the length, and for the email the same `isEmailValid` and options joi's email rule
 * calls), without joi's validation run around them, which cost a twentieth of a submission's CPU.
 * Anything else goes through joi, which words the refusal. A unit test holds the two to agreement.
 */
export function submitterValueAccepted(field: 'submitterEmail' | 'submitterName', value: unknown): boolean {
  if (value === null) return true;
  if (typeof value !== 'string' || value.length === 0) return false;
  return field === 'submitterEmail' ? value.length <= 320 && isEmailValid(value, JOI_EMAIL_OPTIONS) : value.length <= 500;
}

/** submitterEmail/submitterName problems, reported beside the field errors (field = property name). */
export function submitterErrors(submitterEmail: unknown, submitterName: unknown): FieldError[] {
  const errors: FieldError[] = [];
  for (const [field, schema] of submitterSchemas) {
    const value = field === 'submitterEmail' ? submitterEmail : submitterName;
    if (value === undefined || submitterValueAccepted(field, value)) continue;
    const { error } = schema.validate(value, { abortEarly: false });
    for (const d of error?.details ?? []) errors.push({ field, message: d.message.replace(/"/g, '') });
  }
  return errors;
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

/** Sensitive values are sealed before they are stored; reads show `Redacted`. */
function sealSensitive(form: CachedForm, values: Record<string, unknown>, key: Buffer): Record<string, unknown> {
  const out = { ...values };
  for (const field of form.structure.fields) {
    if (field.config?.sensitive === true && field.id in out) out[field.id] = sealValue(out[field.id], key);
  }
  return out;
}

async function checkPayment(deps: SubmissionDeps, form: CachedForm, values: Record<string, unknown>)
  : Promise<{ intentId: string | null; refusal?: SubmissionRefusal }> {
  const field = form.structure.fields.find((f) => f.type === 'payment' && typeof values[f.id] === 'string');
  if (!field) return { intentId: null };
  const intentId = values[field.id] as string;
  try {
    const problem = await verifyPaymentIntent(
      { apiBase: deps.config.stripeApiBase, secretKey: deps.config.stripeSecretKey, timeoutMs: 10_000 },
      intentId, { amount: field.config.amount, currency: field.config.currency, formId: form.id },
    );
    if (problem) return { intentId, refusal: { kind: 'invalid_fields', errors: [{ field: field.id, message: problem }] } };
  } catch (err) {
    if (err instanceof PaymentBackendUnavailable) return { intentId, refusal: { kind: 'payment_unavailable', message: err.message } };
    throw err;
  }
  return { intentId };
}

/** A submission that passed every check, ready to be stored. */
export interface CheckedSubmission {
  row: SubmissionRow;
  submission: CreatedSubmission;
  /** The form it was checked against: its fan-out (event payload, CRM syncs) comes from it too. */
  form: CachedForm;
  /** The uploads it claims, by field. */
  uploads: UploadRef[];
}

/** What one submission carries, whether posted alone or as an item of a batch. */
export interface SubmissionInput {
  data: unknown;
  submitterEmail: string | null;
  submitterName: string | null;
  source: SubmissionSource;
  /** The hosted page's language (a supported one, checked by the public runtime); API submissions have none. */
  language?: string | null;
  metadataErrors?: FieldError[];
}

/** The key an answer is kept under; `claimToken` when this request claimed it (claimIdempotencyKey). */
export type IdempotencyClaim = { key: string; requestHash: string; claimToken?: string } | null;

/**
 * Every check of one submission against a published form, in the order clients see them:
 * invalid data → missing required → field validation → uploads → payment. `uploadRows`: the
 * uploads looked up already (a batch looks up all of its items' in one query).
 */
export async function checkSubmission(
  deps: SubmissionDeps, form: CachedForm, input: SubmissionInput, idem: IdempotencyClaim,
  opts: { paymentMade?: boolean; uploadRows?: Map<string, UploadRow> } = {},
): Promise<{ ok: true; checked: CheckedSubmission } | { ok: false; refusal: SubmissionRefusal }> {
  if (!isPlainObject(input.data)) return { ok: false, refusal: { kind: 'invalid_data' } };
  const check = validateSubmission(form.structure, input.data);
  if (check.missingRequired.length) return { ok: false, refusal: { kind: 'missing_required', fields: check.missingRequired } };
  const fieldErrors = [...check.errors, ...(input.metadataErrors ?? [])];
  if (fieldErrors.length) return { ok: false, refusal: { kind: 'invalid_fields', errors: fieldErrors } };

  let values = check.values;
  const uploads = uploadRefs(form.structure.fields, values);
  if (uploads.length) {
    const checked = await checkUploads(deps, form, values, uploads, opts.uploadRows);
    if (!checked.ok) return { ok: false, refusal: { kind: 'invalid_fields', errors: checked.errors } };
    values = checked.values;
  }

  // Before the payment is made (POST /check), its intent is not succeeded yet: only its format counts.
  const payment = opts.paymentMade === false ? { intentId: null } : await checkPayment(deps, form, values);
  if (payment.refusal) return { ok: false, refusal: payment.refusal };

  const submitter = submitterDetailsToStore(form.structure.fields, values, input);
  const createdAt = new Date();
  const createdIso = createdAt.toISOString();
  const submission: CreatedSubmission = {
    id: newTimeOrderedId('sub', createdAt), formId: form.id, formVersion: form.version, createdAt: createdIso,
  };
  const row: SubmissionRow = {
    id: submission.id, organizationId: form.organizationId, formId: form.id, formUpdatedAt: form.updatedAt, formVersion: form.version,
    month: quotaMonthOfIso(createdIso), data: sealSensitive(form, values, deps.encryptionKey),
    submitterEmail: submitter.submitterEmail, submitterName: submitter.submitterName, source: input.source,
    language: input.language ?? null, createdAt,
    claims: [
      ...(payment.intentId ? [{ kind: 'payment' as const, id: payment.intentId }] : []),
      ...uploads.map(({ uploadId }) => ({ kind: 'upload' as const, id: uploadId })),
    ],
    idempotency: idem ? { ...idem, responseBody: { submission } } : null,
  };
  annotate({ 'form_service.organization.id': row.organizationId, 'form_service.form.id': row.formId, 'form_service.submission.id': row.id });
  return { ok: true, checked: { row, submission, form, uploads } };
}

/** The form changed (or a record under the key vanished) while storing: decide again on a fresh form. */
export const DECIDE_AGAIN = Symbol('decide again');

/** Stores one checked submission, in the next group of the group commit; the answer it alone gets. */
export async function storeCheckedSubmission(deps: SubmissionDeps, checked: CheckedSubmission)
  : Promise<SubmissionResult | typeof DECIDE_AGAIN> {
  const [result] = await storeCheckedSubmissions(deps, [checked], (rows) => deps.submissionWriter.storeEach(rows));
  return result;
}

/**
 * Stores checked submissions through `store` (the group of this turn, or a batch's own group); the
 * answer each alone gets, in their order. An item whose form's listener hint was stale stored
 * nothing: it is stored again, with a delivery per webhook.
 */
export async function storeCheckedSubmissions(
  deps: SubmissionDeps, checked: CheckedSubmission[], store: (rows: SubmissionRow[]) => Promise<Settled[]>,
): Promise<Array<SubmissionResult | typeof DECIDE_AGAIN>> {
  const results: Array<SubmissionResult | typeof DECIDE_AGAIN> = new Array(checked.length);
  for (const { row, form } of checked) row.fanout = createdFanout(form, row, deps.formCache.webhookHint(form.id));
  let pending = checked.map((_, i) => i);
  for (let tries = 0; pending.length > 0; tries++) {
    const settled = await store(pending.map((i) => checked[i].row));
    const unheard: number[] = [];
    for (const [k, i] of pending.entries()) {
      const s = settled[k];
      if ('error' in s) throw s.error;
      const { row, form } = checked[i];
      if (s.outcome.kind === 'listeners_unknown' && tries < 2) {
        deps.formCache.noteWebhooks(form.id, s.outcome.webhooks);
        row.fanout = createdFanout(form, row, s.outcome.webhooks);
        unheard.push(i);
      } else {
        results[i] = await answerOf(deps, checked[i], s.outcome);
      }
    }
    pending = unheard;
  }
  return results;
}

/** The refusal of a submission whose claim of that kind (CLAIM_KINDS) backs another submission. */
const CLAIM_TAKEN: Record<ClaimKind, (deps: SubmissionDeps, checked: CheckedSubmission) => Promise<SubmissionRefusal>> = {
  payment: async () => ({ kind: 'payment_used' }),
  // An upload backs one submission: 400 validation_error / 422 on the fields whose uploads are taken.
  upload: async (deps, { uploads }) => {
    const taken = await claimedUploads(deps.orm.em.fork(), uploads.map((u) => u.uploadId));
    const fields = new Set(uploads.filter((u) => taken.has(u.uploadId)).map((u) => u.fieldId));
    return {
      kind: 'invalid_fields',
      errors: [...(fields.size ? fields : new Set(uploads.map((u) => u.fieldId)))]
        .map((field) => ({ field, message: 'This upload is already used by another submission' })),
    };
  },
};

/** What a client is answered for a stored (or refused) submission. */
async function answerOf(deps: SubmissionDeps, checked: CheckedSubmission, outcome: InsertOutcome)
  : Promise<SubmissionResult | typeof DECIDE_AGAIN> {
  const { row, submission } = checked;
  switch (outcome.kind) {
    case 'created':
      submissionStored(deps, [row], outcome);
      return { ok: true, submission, replayed: false };
    case 'quota_exceeded':
      metrics.quotaRejections.inc();
      return refuse({ kind: 'quota_exceeded' });
    case 'claim_taken':
      return refuse(await CLAIM_TAKEN[outcome.claim](deps, checked));
    case 'idempotency_lost':
      return refuse({ kind: 'idempotency_key_in_use' });
    case 'idempotency_conflict': {
      const stored = await findIdempotencyRecord(deps.orm, row.organizationId, row.idempotency!.key);
      return stored ? replay(stored, row.idempotency!.requestHash) : DECIDE_AGAIN;
    }
    case 'form_changed':
      return DECIDE_AGAIN; // the cached form is stale: reload it and decide again
    case 'listeners_unknown':
      return DECIDE_AGAIN; // webhooks keep changing under it
  }
}

/**
 * After commit: count them, remember how many webhooks listened, and queue the deliveries (with the
 * rest of their storing group, in one job) and syncs their statement created. When Redis is down or the add fails, the rows stay pending and the sweep
 * of owed work queues them (sweep-owed.ts), so a failure here is not an error.
 */
export function submissionStored(deps: SubmissionDeps, rows: SubmissionRow[], created: CreatedFanout): void {
  for (const row of rows) metrics.submissions.inc({ source: row.source });
  deps.formCache.noteWebhooks(rows[0].formId, created.webhooks);
  const deferred = (err: Error) => deps.logger.debug({ err: err.message, submissionId: rows[0].id }, 'enqueue left to the owed-work sweep');
  for (const deliveryId of created.deliveryIds) deps.producer.deliverSoon(deliveryId, created.jobGroup).catch(deferred);
  for (const syncId of created.syncIds) deps.producer.addSoon('crm', 'sync', { syncId }).catch(deferred);
}

/** The form a request names, or why there is none to submit to. */
export async function submittableForm(deps: SubmissionDeps, organizationId: string | null, formId: string, fresh: boolean)
  : Promise<{ form: CachedForm } | { refusal: SubmissionRefusal }> {
  const form = await deps.formCache.get(formId, fresh);
  if (!form || (organizationId && form.organizationId !== organizationId)) return { refusal: { kind: 'not_found' } };
  if (form.status !== 'published') return { refusal: { kind: 'not_published' } };
  return { form };
}

/**
 * The one submission flow for the API and the public runtime; its checks answer in this order:
 * 404 → not published → invalid data → missing required → field validation → payment → quota → claim.
 * With an Idempotency-Key the request first claims the key: a retry while it runs is told to wait
 * (never an answer this request would not have given), and anything but a 201 frees the key again.
 */
export async function createSubmission(deps: SubmissionDeps, request: SubmissionRequest): Promise<SubmissionResult> {
  if (!request.idempotencyKey || !request.organizationId) return decideAndStore(deps, request, null);
  const key = request.idempotencyKey;
  const requestHash = requestFingerprint(request.formId, request.requestBody);
  return underIdempotencyKey<SubmissionResult>(deps, request.organizationId, key, requestHash, {
    replay: (stored) => replay(stored, requestHash),
    inUse: () => refuse({ kind: 'idempotency_key_in_use' }),
    // A 201 completed the claim inside its insert statement; anything else frees the key.
    run: async (claimToken) => {
      const result = await decideAndStore(deps, request, { key, requestHash, claimToken });
      return { result, kept: result.ok };
    },
  });
}

/**
 * The claim around any request that replays its first answer: an answered key replays, a key held
 * by a running request is in use, and a claimed one runs the work, which says whether it kept the
 * answer under the key; otherwise the claim is released so a retry decides afresh (a failure to
 * release leaves the key to its lease).
 */
export async function underIdempotencyKey<T>(
  deps: SubmissionDeps, organizationId: string, key: string, requestHash: string,
  outcomes: {
    replay(stored: StoredIdempotency): T;
    inUse(): T;
    run(claimToken: string, em: Em): Promise<{ result: T; kept: boolean }>;
  },
): Promise<T> {
  const em = deps.orm.em.fork();
  const claim = await claimIdempotencyKey(em, organizationId, key, requestHash);
  if (claim.kind === 'completed') return outcomes.replay(claim.stored);
  if (claim.kind === 'in_progress') return outcomes.inUse();
  let kept = false;
  try {
    const run = await outcomes.run(claim.token, em);
    kept = run.kept;
    return run.result;
  } finally {
    if (!kept) {
      await releaseIdempotencyKey(em, organizationId, key, claim.token)
        .catch((err) => deps.logger.debug({ err: err.message }, 'idempotency key left to its lease'));
    }
  }
}

/**
 * Answers given to version `answered` of a form that its current version refuses: `form_changed`
 * (with the current form, for the page to show it) rather than the refusal, which names questions
 * the person may never have seen. Answers the current version accepts are stored under it.
 */
export function refusalOfChangedForm(answered: number | null | undefined, form: CachedForm, refusal: SubmissionRefusal): SubmissionRefusal {
  const validation = refusal.kind === 'invalid_data' || refusal.kind === 'missing_required' || refusal.kind === 'invalid_fields';
  return validation && answered != null && answered !== form.version ? { kind: 'form_changed', form } : refusal;
}

async function decideAndStore(deps: SubmissionDeps, request: SubmissionRequest, idem: IdempotencyClaim): Promise<SubmissionResult> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const found = await submittableForm(deps, request.organizationId, request.formId, attempt > 0);
    if ('refusal' in found) return refuse(found.refusal);
    const check = await checkSubmission(deps, found.form, request, idem);
    if (!check.ok) {
      const refusal = refusalOfChangedForm(request.formVersion, found.form, check.refusal);
      // This process's cached form may lag behind the one the page was given: a 409 carries the
      // form as the database has it, never an older one the page would fall back to.
      if (refusal.kind === 'form_changed' && attempt === 0) continue;
      return refuse(refusal);
    }
    const result = await storeCheckedSubmission(deps, check.checked);
    if (result !== DECIDE_AGAIN) return result;
  }
  throw new Error('form kept changing while the submission was being stored');
}

export function replay(stored: { requestHash: string; body: unknown }, requestHash: string): SubmissionResult {
  if (stored.requestHash !== requestHash) return refuse({ kind: 'idempotency_key_reused' });
  return { ok: true, submission: replayedSubmission((stored.body as { submission: CreatedSubmission }).submission), replayed: true };
}

/**
 * The deletion event's fan-out, after the deleting transaction commits; when Redis is down the
 * outbox relay sends it later, so a failure here is not an error.
 */
export function enqueueDeletionFanout(deps: SubmissionDeps, submissionId: string, outboxId: string): void {
  deps.producer.addSoon('submissions', 'fanout-deletion', { submissionId, outboxId })
    .catch((err) => deps.logger.debug({ err: err.message, submissionId }, 'enqueue deferred to the outbox relay'));
}

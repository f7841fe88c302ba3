import {
  checkSubmission, DECIDE_AGAIN, replay, replayedSubmission, requestFingerprint, storeCheckedSubmissions, submittableForm, underIdempotencyKey,
  type CheckedSubmission, type CreatedSubmission, type IdempotencyClaim, type SubmissionInput, type SubmissionRefusal,
  type SubmissionDeps, type SubmissionResult,
} from './create-submission';
import { completeIdempotencyKey, findIdempotencyRecords } from './idempotency-records';
import type { CachedForm } from '../forms/form-cache';
import { isPlainObject } from '../../lib/objects';
import { mapAtMost } from '../../lib/map-at-most';
import { isUploadId } from '../files/rules';
import { findUploads, type UploadRow } from '../files/store';
import { uploadRefs } from '../files/uploads';
import type { FieldError } from './validate';

export const BATCH_MAX_ITEMS = 100;
/** Payment intents of one batch verified with Stripe at the same time. */
const PAYMENT_CHECKS_AT_ONCE = 8;

export interface BatchItem extends SubmissionInput {
  /** The item as sent: its fingerprint is the one it would have if posted alone. */
  body: unknown;
}

export interface BatchRequest {
  organizationId: string;
  formId: string;
  /** The items, or what is wrong with the envelope (reported after the form's own checks). */
  envelope: { items: BatchItem[] } | { errors: FieldError[] };
  idempotencyKey: string | null;
  requestBody: unknown;
}

export type BatchItemOutcome =
  | { index: number; ok: true; submission: CreatedSubmission }
  | { index: number; ok: false; refusal: SubmissionRefusal };

export type BatchResult =
  | { ok: true; outcomes: BatchItemOutcome[]; replayed: boolean }
  | { ok: false; refusal: SubmissionRefusal };

/**
 * An item's own idempotency key, derived from the batch's: a retried batch replays the items an
 * earlier attempt stored and stores only the rest. A header value cannot hold a line feed, so no
 * key a client sends can collide with one of these.
 */
export function itemIdempotencyKey(batchKey: string, index: number): string {
  return `${batchKey}\n${index}`;
}

function outcomeOf(index: number, result: SubmissionResult): BatchItemOutcome {
  return result.ok ? { index, ok: true, submission: result.submission } : { index, ok: false, refusal: result.refusal };
}

/**
 * Up to 100 submissions to one form, each checked and stored as if it had been posted alone, in
 * order: the batch is one group of the storing statement (storeSubmissions), which decides each
 * item on its own and gives each the answer it alone would get.
 * With an Idempotency-Key the batch first claims it, like a single submission: a retry while the
 * first runs is told to wait, and a batch that ends without an answer to keep frees the key.
 */
export async function createSubmissionBatch(deps: SubmissionDeps, request: BatchRequest): Promise<BatchResult> {
  if (!request.idempotencyKey) return decideBatch(deps, request, null);
  const idem = { key: request.idempotencyKey, requestHash: requestFingerprint(`${request.formId}/batch`, request.requestBody) };
  return underIdempotencyKey<BatchResult>(deps, request.organizationId, idem.key, idem.requestHash, {
    replay: (stored) => (stored.requestHash !== idem.requestHash
      ? { ok: false, refusal: { kind: 'idempotency_key_reused' } }
      : {
        ok: true, replayed: true,
        outcomes: (stored.body as { results: BatchItemOutcome[] }).results
          .map((item) => (item.ok ? { ...item, submission: replayedSubmission(item.submission) } : item)),
      }),
    inUse: () => ({ ok: false, refusal: { kind: 'idempotency_key_in_use' } }),
    run: async (claimToken, em) => {
      const result = await decideBatch(deps, request, idem);
      // A refusal that a retry may not get again (the payment backend was away) is not kept.
      const keep = result.ok && !result.outcomes.some((o) => !o.ok && o.refusal.kind === 'payment_unavailable');
      const kept = keep && await completeIdempotencyKey(em, request.organizationId, idem.key, claimToken, 200, { results: result.outcomes });
      return { result, kept };
    },
  });
}

/** The uploads all items name, in one query (none when no item names one). */
async function batchUploads(deps: SubmissionDeps, form: CachedForm, data: unknown[]): Promise<Map<string, UploadRow>> {
  const ids = data.flatMap((d) => (isPlainObject(d) ? uploadRefs(form.structure.fields, d) : [])).map((r) => r.uploadId).filter(isUploadId);
  return findUploads(deps.orm.em.fork(), form.organizationId, [...new Set(ids)]);
}

async function decideBatch(
  deps: SubmissionDeps, request: BatchRequest, idem: { key: string; requestHash: string } | null,
): Promise<BatchResult> {
  const first = await submittableForm(deps, request.organizationId, request.formId, false);
  if ('refusal' in first) return { ok: false, refusal: first.refusal };
  if ('errors' in request.envelope) return { ok: false, refusal: { kind: 'invalid_fields', errors: request.envelope.errors } };
  const { items } = request.envelope;

  const outcomes: Array<BatchItemOutcome | undefined> = new Array(items.length);
  const itemIdem: IdempotencyClaim[] = items.map((item, i) => (idem
    ? { key: itemIdempotencyKey(idem.key, i), requestHash: requestFingerprint(request.formId, item.body) }
    : null));
  if (idem) {
    const stored = await findIdempotencyRecords(deps.orm, request.organizationId, itemIdem.map((c) => c!.key));
    itemIdem.forEach((claim, i) => {
      const record = stored.get(claim!.key);
      if (record) outcomes[i] = outcomeOf(i, replay(record, claim!.requestHash));
    });
  }

  let form = first.form;
  for (let attempt = 0; attempt < 3; attempt++) {
    if (attempt > 0) {
      const found = await submittableForm(deps, request.organizationId, request.formId, true);
      if ('refusal' in found) {
        outcomes.forEach((o, i) => { outcomes[i] = o ?? { index: i, ok: false, refusal: found.refusal }; });
        break;
      }
      form = found.form;
    }
    const pending = items.map((_, i) => i).filter((i) => !outcomes[i]);
    const uploadRows = await batchUploads(deps, form, pending.map((i) => items[i].data));
    const checks = await mapAtMost(pending, PAYMENT_CHECKS_AT_ONCE, (i) => checkSubmission(deps, form, items[i], itemIdem[i], { uploadRows }));
    const ready: Array<{ index: number; checked: CheckedSubmission }> = [];
    checks.forEach((check, k) => {
      const index = pending[k];
      if (check.ok) ready.push({ index, checked: check.checked });
      else outcomes[index] = { index, ok: false, refusal: check.refusal };
    });
    if (ready.length === 0) break;

    const results = await storeCheckedSubmissions(deps, ready.map((r) => r.checked), (rows) => deps.submissionWriter.storeGroup(rows));
    let decideAgain = false;
    results.forEach((result, k) => {
      const { index } = ready[k];
      if (result === DECIDE_AGAIN) decideAgain = true;
      else outcomes[index] = outcomeOf(index, result);
    });
    if (!decideAgain) break;
  }
  if (outcomes.some((o) => !o)) throw new Error('form kept changing while the batch was being stored');

  return { ok: true, outcomes: outcomes as BatchItemOutcome[], replayed: false };
}

import type { Field } from '../forms/types';
import { keyByLabel, redact } from '../submissions/shown-values';
import {
  FORM_SUBMISSION_CREATED, FORM_SUBMISSION_DELETED, OPERATIONAL_EVENTS, SUBMISSION_CREATED, SUBMISSION_DELETED,
} from './event-types';
import { signPayload, standardSignatureHeader } from './signing';

export { FORM_SUBMISSION_CREATED, FORM_SUBMISSION_DELETED, SUBMISSION_CREATED, SUBMISSION_DELETED };
export const WEBHOOK_TEST = 'webhook.test';
export const EVENT_ALIASES: Record<string, string> = {
  [SUBMISSION_CREATED]: SUBMISSION_CREATED,
  [FORM_SUBMISSION_CREATED]: SUBMISSION_CREATED,
  [SUBMISSION_DELETED]: SUBMISSION_DELETED,
  [FORM_SUBMISSION_DELETED]: SUBMISSION_DELETED,
  ...Object.fromEntries(OPERATIONAL_EVENTS.map((event) => [event, event])),
};
export const USER_AGENT = 'FormService-Webhooks/1';

/** Aliases become the stored name; repeats collapse, first occurrence order kept. */
export function normalizeEvents(events: readonly string[]): string[] {
  return [...new Set(events.map((e) => EVENT_ALIASES[e] ?? e))];
}

/** One event per submission, so a re-run of the fan-out maps to the same delivery rows. */
export function eventIdForSubmission(submissionId: string): string {
  return `evt_${submissionId.replace(/^sub_/, '')}`;
}

/**
 * The deletion of a submission is one event too; the suffix keeps it apart from the created
 * event's id (`_` is not a base62 character, so no submission id can produce it).
 */
export function deletionEventIdForSubmission(submissionId: string): string {
  return `${eventIdForSubmission(submissionId)}_deleted`;
}

/** All the payload needs of a field. */
export type LabelledField = Pick<Field, 'id' | 'label'>;

export interface SubmissionSnapshot {
  id: string;
  formId: string;
  createdAt: Date;
  submitterEmail: string | null;
  submitterName: string | null;
  /** The form version it was validated against; null (or absent) when not recorded. */
  formVersion?: number | null;
  /** As stored: keyed by field id, sensitive values sealed. */
  data: Record<string, unknown>;
}

export interface SubmissionEvent {
  id: string;
  type: typeof FORM_SUBMISSION_CREATED;
  createdAt: string;
  data: {
    form: { id: string; title: string };
    submission: {
      id: string; formId: string; formVersion: number | null; createdAt: string; submitterEmail: string | null;
      submitterName: string | null; data: Record<string, unknown>; rawData: Record<string, unknown>;
    };
  };
}

/**
 * The submission event payload (`{id, type, createdAt, data: {form, submission}}`, the SubmissionEvent
 * webhook of openapi.yaml); its `createdAt` is the submission's, so a re-built payload is identical. */
export function buildSubmissionEvent(form: { id: string; title: string }, submission: SubmissionSnapshot, fields: LabelledField[]): SubmissionEvent {
  const rawData = redact(submission.data);
  const createdAt = submission.createdAt.toISOString();
  return {
    id: eventIdForSubmission(submission.id),
    type: FORM_SUBMISSION_CREATED,
    createdAt,
    data: {
      form: { id: form.id, title: form.title },
      submission: {
        id: submission.id, formId: submission.formId, formVersion: submission.formVersion ?? null, createdAt,
        submitterEmail: submission.submitterEmail, submitterName: submission.submitterName,
        // keyByLabel reads nothing of a field but its id and label.
        data: keyByLabel(rawData, fields as Field[]), rawData,
      },
    },
  };
}

export interface SubmissionDeletedEvent {
  id: string;
  type: typeof FORM_SUBMISSION_DELETED;
  createdAt: string;
  data: { form: { id: string; title: string }; submission: { id: string; formId: string } };
}

/** Built when the submission is deleted: afterwards nothing of it is left to read. */
export function buildSubmissionDeletedEvent(
  form: { id: string; title: string }, submission: { id: string; formId: string }, deletedAt: Date,
): SubmissionDeletedEvent {
  return {
    id: deletionEventIdForSubmission(submission.id),
    type: FORM_SUBMISSION_DELETED,
    createdAt: deletedAt.toISOString(),
    data: { form: { id: form.id, title: form.title }, submission: { id: submission.id, formId: submission.formId } },
  };
}

export function buildTestEvent(eventId: string, webhookId: string, now: Date) {
  return { id: eventId, type: WEBHOOK_TEST, createdAt: now.toISOString(), data: { webhookId } };
}

/**
 * Headers of one attempt: signed over this attempt's timestamp and the exact body sent. While a
 * rotated-out secret is still within its grace, the same bytes are also signed with it, so a
 * receiver that has not deployed the new secret yet keeps verifying. Beside the `X-Service-*`
 * headers, the Standard Webhooks ones (`webhook-id` is the event id, the same on every retry;
 * `webhook-timestamp` the same seconds; `webhook-signature` both signatures during a grace, new first).
 */
export function deliveryHeaders(opts: {
  secret: string; previousSecret?: string | null; body: string; eventType: string; deliveryId: string; eventId: string; nowSeconds: number;
}): Record<string, string> {
  return {
    'webhook-id': opts.eventId,
    'webhook-timestamp': String(opts.nowSeconds),
    'webhook-signature': standardSignatureHeader(opts, opts.eventId, opts.nowSeconds, opts.body),
    'Content-Type': 'application/json',
    'User-Agent': USER_AGENT,
    'X-Service-Signature': signPayload(opts.secret, opts.nowSeconds, opts.body),
    ...(opts.previousSecret ? { 'X-Service-Signature-Previous': signPayload(opts.previousSecret, opts.nowSeconds, opts.body) } : {}),
    'X-Service-Timestamp': String(opts.nowSeconds),
    'X-Service-Event': opts.eventType,
    'X-Service-Delivery': opts.deliveryId,
  };
}

import Joi from 'joi';
import type { Request, Server } from 'restify';
import type { AppContext } from '../../app';
import { findForm } from '../../domain/forms/form-service';
import {
  BATCH_MAX_ITEMS, createSubmissionBatch, type BatchRequest,
} from '../../domain/submissions/batch-submission';
import { readChanges } from '../../domain/submissions/change-feed';
import { decodeCursor, encodeCursor, START_POSITION } from '../../domain/submissions/changes';
import {
  createSubmission, enqueueDeletionFanout, submitterErrors, type SubmissionInput,
} from '../../domain/submissions/create-submission';
import {
  EXPORT_CONTENT_TYPES, ExportCapacityReached, openSubmissionExport, type ExportFormat,
} from '../../domain/submissions/export';
import {
  deleteSubmission, findSubmission, listSubmissions,
} from '../../domain/submissions/read-service';
import { refundPaymentsOfRefusedSubmission } from '../../domain/payments/refunds';
import { errors } from '../errors';
import { refusalToApiError } from '../presenters/refusals';
import { presentBatchItem, presentSubmission, presentSubmissionListItem } from '../presenters/submissions';
import { authenticated } from '../pipeline';
import { validate } from '../validation';
import { dateOrDateTime, FORM_ID, formIdParam, submissionIdParam } from './schemas';
import { isDateOnly, LAST_INSTANT, parseUtcInstant } from '../../lib/dates';

const DAY_MS = 86_400_000;
const isoDate = dateOrDateTime;

const listQuerySchema = Joi.object({
  limit: Joi.number().integer().min(1).max(100).default(50),
  offset: Joi.number().integer().min(0).default(0),
  startDate: isoDate,
  endDate: isoDate,
}).unknown(true);

const exportQuerySchema = Joi.object({
  format: Joi.string().valid('csv', 'ndjson').required(),
  version: Joi.number().integer().min(1).max(2_147_483_647),
  startDate: isoDate,
  endDate: isoDate,
}).unknown(true);

const changesQuerySchema = Joi.object({
  after: Joi.string().allow('').custom((value: string, helpers) =>
    decodeCursor(value) === null ? helpers.message({ custom: '{{#label}} is not a cursor this service issued' }) : value),
  formId: Joi.string(),
  limit: Joi.number().integer().min(1).max(1000).default(100),
}).unknown(true);

/** A date alone covers its whole UTC day; a date-time is exact. */
export function dateBounds(startDate?: string, endDate?: string): { from: Date | null; until: Date | null } {
  const from = startDate ? parseUtcInstant(startDate) : null;
  const end = endDate ? parseUtcInstant(endDate) : null;
  const untilMs = end && endDate ? end.getTime() + (isDateOnly(endDate) ? DAY_MS : 1) : null;
  // No row is stored after year 9999: an end past it is no bound (and could not be written as one).
  const until = untilMs !== null && untilMs <= LAST_INSTANT ? new Date(untilMs) : null;
  return { from, until };
}

export const IDEMPOTENCY_KEY_MAX = 255;

function idempotencyKeyHeader(req: Request): string | null {
  const key = req.header('idempotency-key') || null;
  if (key && key.length > IDEMPOTENCY_KEY_MAX) {
    throw errors.validation([{ field: 'Idempotency-Key', message: `must be at most ${IDEMPOTENCY_KEY_MAX} characters` }]);
  }
  return key;
}

/** One submission as the API takes it: `data` plus the submitter metadata; other keys are errors. */
function submissionInput(body: unknown): SubmissionInput {
  const input = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  const { submitterEmail, submitterName, data, ...unknownKeys } = input;
  return {
    data, source: 'api',
    submitterEmail: typeof submitterEmail === 'string' ? submitterEmail : null,
    submitterName: typeof submitterName === 'string' ? submitterName : null,
    metadataErrors: [
      ...submitterErrors(submitterEmail, submitterName),
      ...Object.keys(unknownKeys).map((k) => ({ field: k, message: 'Unknown property' })),
    ],
  };
}

/** The batch's items, or what is wrong with its envelope. */
function batchEnvelope(body: unknown): BatchRequest['envelope'] {
  const { submissions, ...others } = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  const errs = Object.keys(others).map((k) => ({ field: k, message: 'Unknown property' }));
  if (!Array.isArray(submissions)) errs.unshift({ field: 'submissions', message: 'submissions must be an array' });
  else if (submissions.length === 0 || submissions.length > BATCH_MAX_ITEMS) {
    errs.unshift({ field: 'submissions', message: `submissions must hold 1 to ${BATCH_MAX_ITEMS} items` });
  }
  if (errs.length) return { errors: errs };
  return { items: (submissions as unknown[]).map((item) => ({ ...submissionInput(item), body: item })) };
}

export function registerSubmissionRoutes(server: Server, app: AppContext): void {
  server.post('/v1/forms/:formId/submissions', authenticated(app, 'submissions:write', async ({ organizationId, req, json }) => {
    const body = json();
    const formId = formIdParam(req);
    if (!formId) throw errors.notFound('Form not found');
    const idempotencyKey = idempotencyKeyHeader(req);
    const result = await createSubmission(app, {
      organizationId, formId, idempotencyKey, requestBody: body, ...submissionInput(body),
    });
    if (!result.ok) {
      // No one is charged without a stored submission. Only refusals of the caller's own form:
      // a not_found may name another organization's form.
      if (result.refusal.kind === 'quota_exceeded' || result.refusal.kind === 'not_published') {
        await refundPaymentsOfRefusedSubmission(app, formId, (body as { data?: unknown } | null)?.data);
      }
      throw refusalToApiError(result.refusal);
    }
    return {
      status: 201,
      body: { submission: result.submission },
      headers: result.replayed ? { 'Idempotent-Replayed': 'true' } : undefined,
    };
  }));

  server.get('/v1/forms/:formId/submissions', authenticated(app, 'submissions:read', async ({ em, readLagging, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw errors.notFound('Form not found');
    const query = validate<{ limit: number; offset: number; startDate?: string; endDate?: string }>(listQuerySchema, req.query ?? {});
    const { items, total } = await readLagging((readEm) => listSubmissions(readEm, organizationId, formId, {
      limit: query.limit, offset: query.offset, ...dateBounds(query.startDate, query.endDate),
    }, app.config.dayMarks));
    return {
      status: 200,
      body: {
        submissions: items.map((item) => presentSubmissionListItem(item, app.files.links)),
        pagination: { limit: query.limit, offset: query.offset, total },
      },
    };
  }));

  server.post('/v1/forms/:formId/submissions/batch', authenticated(app, 'submissions:write', async ({ organizationId, req, json }) => {
    const body = json();
    const formId = formIdParam(req);
    if (!formId) throw errors.notFound('Form not found');
    const result = await createSubmissionBatch(app, {
      organizationId, formId, envelope: batchEnvelope(body), idempotencyKey: idempotencyKeyHeader(req), requestBody: body,
    });
    if (!result.ok) throw refusalToApiError(result.refusal);
    return {
      status: 200,
      body: { results: result.outcomes.map(presentBatchItem) },
      headers: result.replayed ? { 'Idempotent-Replayed': 'true' } : undefined,
    };
  }));

  server.get('/v1/forms/:formId/submissions/export', authenticated(app, 'submissions:read', async ({ em, readLagging, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw errors.notFound('Form not found');
    const query = validate<{ format: ExportFormat; startDate?: string; endDate?: string; version?: number }>(exportQuerySchema, req.query ?? {});
    const form = await app.formCache.get(formId, true);
    if (!form || form.organizationId !== organizationId) throw errors.notFound('Form not found');
    // Read fresh, the form's version is its newest: versions are kept from 1 up with none skipped.
    if (query.version && query.version > form.version) throw errors.notFound('Form version not found');
    const bounds = { ...dateBounds(query.startDate, query.endDate), version: query.version ?? null };
    // An export the primary opens after the budget is never sent: destroying its rows gives its connection back.
    const stream = await readLagging((_em, orm) => openSubmissionExport(orm, organizationId, form, query.format, bounds, app.files.links),
      (late) => late[0].destroy())
      .catch((err) => {
        if (err instanceof ExportCapacityReached) throw errors.serviceUnavailable('Too many exports are running; retry shortly');
        throw err;
      });
    return {
      status: 200,
      headers: {
        'Content-Type': EXPORT_CONTENT_TYPES[query.format],
        'Content-Disposition': `attachment; filename="${form.id}-submissions.${query.format}"`,
      },
      stream,
    };
  }));

  server.get('/v1/submissions/changes', authenticated(app, 'submissions:read', async ({ em, readLagging, organizationId, req }) => {
    const formId = typeof req.query?.formId === 'string' ? req.query.formId : null;
    if (req.query?.formId !== undefined && (!formId || !FORM_ID.test(formId) || !(await findForm(em, organizationId, formId)))) {
      throw errors.notFound('Form not found');
    }
    const query = validate<{ after?: string; limit: number }>(changesQuerySchema, req.query ?? {});
    const after = query.after ? decodeCursor(query.after)! : START_POSITION;
    const { changes, hasMore } = await readLagging((readEm) => readChanges(readEm, organizationId, { after, formId, limit: query.limit }, app.files.links));
    return {
      status: 200,
      body: {
        changes: changes.map(({ at: _at, ...change }) => change),
        nextCursor: changes.length ? encodeCursor(changes[changes.length - 1].at) : (query.after || encodeCursor(after)),
        hasMore,
      },
    };
  }));

  server.get('/v1/submissions/:submissionId', authenticated(app, 'submissions:read', async ({ em, organizationId, req }) => {
    const id = submissionIdParam(req);
    const submission = id && (await findSubmission(em, organizationId, id));
    if (!submission) throw errors.notFound('Submission not found');
    const form = await app.formCache.get(submission.formId);
    return { status: 200, body: { submission: presentSubmission(submission, form?.structure.fields ?? [], app.files.links) } };
  }));

  server.del('/v1/submissions/:submissionId', authenticated(app, 'submissions:write', async ({ em, organizationId, req }) => {
    const id = submissionIdParam(req);
    const deleted = id && (await deleteSubmission(em, organizationId, id));
    if (!deleted) throw errors.notFound('Submission not found');
    enqueueDeletionFanout(app, deleted.id, deleted.outboxId);
    return { status: 204 };
  }));
}

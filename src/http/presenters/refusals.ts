import type { PublicFormJson } from '../../domain/public/types';
import type { PublicRefusal } from '../../domain/public/public-submission';
import type { SubmissionRefusal } from '../../domain/submissions/create-submission';
import type { CachedForm } from '../../domain/forms/form-cache';
import { ApiError, errors } from '../errors';
import { PublicError, publicErrors } from '../public-pipeline';

type Refusal<K extends PublicRefusal['kind']> = Extract<PublicRefusal, { kind: K }>;

/**
 * Every refusal of a submission, in the API's error shape and in the public one. `bad_body` and
 * `captcha` come from the public runtime only; public submissions carry no idempotency key.
 */
const REFUSALS: {
  [K in PublicRefusal['kind']]: {
    api: K extends SubmissionRefusal['kind'] ? (refusal: Refusal<K>) => ApiError : null;
    public: (refusal: Refusal<K>) => PublicError;
  }
} = {
  not_found: {
    api: () => errors.notFound('Form not found'),
    public: () => publicErrors.formNotFound(),
  },
  not_published: {
    api: () => new ApiError(400, 'form_not_published', 'Form is not published'),
    public: () => publicErrors.formNotFound(),
  },
  bad_body: {
    api: null,
    public: (refusal) => publicErrors.invalidData(refusal.message),
  },
  invalid_data: {
    api: () => new ApiError(400, 'invalid_data', 'Request body must contain a "data" object'),
    public: () => publicErrors.invalidData('Request body must contain a "values" object'),
  },
  missing_required: {
    api: (refusal) => new ApiError(400, 'missing_required_fields',
      `Missing required fields: ${refusal.fields.map((f) => f.label).join(', ')}`,
      refusal.fields.map((f) => ({ field: f.id, message: `${f.label} is required` }))),
    public: (refusal) => new PublicError(422, {
      success: false,
      errors: Object.fromEntries(refusal.fields.map((field) => [field.id, `${field.label || 'This field'} is required`])),
    }),
  },
  invalid_fields: {
    api: (refusal) => errors.validation(refusal.errors, 'Submission data failed validation'),
    public: (refusal) => new PublicError(422, {
      success: false,
      errors: Object.fromEntries(refusal.errors.map((error) => [error.field, error.message])),
    }),
  },
  captcha: {
    api: null,
    public: (refusal) => (refusal.refusal === 'verification_unavailable'
      ? new PublicError(503, { success: false, error: 'service_unavailable', message: 'Bot verification is unavailable; retry later' }, { 'Retry-After': 5 })
      : new PublicError(422, { success: false, error: refusal.refusal })),
  },
  quota_exceeded: {
    api: () => new ApiError(402, 'limit_exceeded', 'Monthly submission quota of the plan reached'),
    public: () => new PublicError(402, { success: false, error: 'limit_exceeded' }),
  },
  payment_used: {
    api: () => new ApiError(409, 'payment_already_used',
      'This payment has already been used by a submission; create a new payment intent to submit again'),
    public: () => new PublicError(409, {
      success: false, error: 'payment_already_used',
      message: 'This payment has already been used for a submission; start a new payment to submit again',
    }),
  },
  payment_unavailable: {
    api: () => errors.serviceUnavailable('Payment verification is unavailable; retry later'),
    public: () => new PublicError(503, { success: false, error: 'service_unavailable' }, { 'Retry-After': 5 }),
  },
  idempotency_key_reused: {
    api: () => new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was already used with a different request body'),
    public: () => publicErrors.internal(),
  },
  // Only the public runtime takes `formVersion`; the body carries the current public form (publicRefusalError).
  form_changed: {
    api: (refusal) => new ApiError(409, 'form_changed', `The form changed (now version ${refusal.form.version}); submit again`),
    public: () => new PublicError(409, {
      success: false, error: 'form_changed',
      message: 'The form changed since it was loaded; answer its current version and submit again',
    }),
  },
  idempotency_key_in_use: {
    api: () => new ApiError(409, 'idempotency_key_in_use',
      'A request with this Idempotency-Key is still in progress; retry shortly', undefined, { 'Retry-After': 1 }),
    public: () => publicErrors.internal(),
  },
};

export function refusalToApiError(refusal: SubmissionRefusal): ApiError {
  return (REFUSALS[refusal.kind].api as (refusal: SubmissionRefusal) => ApiError)(refusal);
}

/** `toPublicForm` builds the current public form a `form_changed` refusal carries (publicFormBuilder). */
export function publicRefusalError(refusal: PublicRefusal, toPublicForm?: (form: CachedForm) => PublicFormJson): PublicError {
  const error = (REFUSALS[refusal.kind].public as (refusal: PublicRefusal) => PublicError)(refusal);
  if (refusal.kind === 'form_changed' && toPublicForm) error.body.form = toPublicForm(refusal.form);
  return error;
}

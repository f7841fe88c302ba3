import Joi from 'joi';
import { INTEGRATION_ID } from '../../domain/forms/settings';
import { LANGUAGES } from '../../domain/public/messages';
import type { Request } from 'restify';
import { parseUtcInstant } from '../../lib/dates';

export const FORM_ID = /^form_[a-zA-Z0-9]+$/;
export const SUBMISSION_ID = /^sub_[a-zA-Z0-9]+$/;

/** A path id that does not match its pattern names nothing: callers answer 404. */
export function formIdParam(req: Request): string | null {
  const id = req.params?.formId;
  return typeof id === 'string' && FORM_ID.test(id) ? id : null;
}

export function submissionIdParam(req: Request): string | null {
  const id = req.params?.submissionId;
  return typeof id === 'string' && SUBMISSION_ID.test(id) ? id : null;
}

/**
 * A query's or body's ISO 8601 date or date-time, kept as sent (whether it was a date alone decides
 * the day semantics); a date-time without an offset is UTC (src/lib/dates.ts).
 */
export const dateOrDateTime = Joi.string().custom((value: string, helpers) =>
  parseUtcInstant(value) === null ? helpers.message({ custom: '{{#label}} must be an ISO 8601 date or date-time' }) : value);

/** An ISO 8601 date-time, as the instant it names (UTC where it gives no offset). */
export const utcDateTime = Joi.any().custom((value: unknown, helpers) => {
  const at = typeof value === 'string' && !/^\d{4}-\d{2}-\d{2}$/.test(value) ? parseUtcInstant(value) : null;
  return at ?? helpers.message({ custom: '{{#label}} must be an ISO 8601 date-time' });
});

const cssSafe = Joi.alternatives(Joi.string().max(200), Joi.number());

/** Free-form settings, with the keys the service itself reads checked for type. */
export const settingsSchema = Joi.object({
  redirectUrl: Joi.string().uri({ scheme: ['http', 'https'] }).allow(null),
  submitButtonText: Joi.string().max(100),
  successMessage: Joi.string().max(2000),
  /** Pins the hosted page's language (README.md "Languages"); null: the respondent's browser decides. */
  language: Joi.string().valid(...LANGUAGES).allow(null)
    .messages({ 'any.only': `language must be one of ${LANGUAGES.join(', ')}` }),
  botProtection: Joi.object({ enabled: Joi.boolean().required() }).unknown(true),
  theme: Joi.object({
    preset: Joi.string().max(50).allow(null),
    tokens: Joi.object().pattern(/^[A-Za-z][A-Za-z0-9-]{0,63}$/, cssSafe),
  }).allow(null),
  integrations: Joi.array().max(10).items(Joi.object({
    id: Joi.string().pattern(INTEGRATION_ID).messages({ 'string.pattern.base': 'id must be an integration id (int_…) as reads show it' }),
    type: Joi.string().valid('hubspot').required(),
    accessToken: Joi.string().min(1).max(2000).required(),
    fieldMap: Joi.object().pattern(/^[A-Za-z0-9_-]{1,64}$/, Joi.string().min(1).max(100)).required(),
    enabled: Joi.boolean(),
  })),
}).unknown(true);

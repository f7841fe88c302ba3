import type Joi from 'joi';
import { errors, type ErrorDetail } from './errors';

export function joiDetails(error: Joi.ValidationError): ErrorDetail[] {
  return error.details.map((d) => ({
    field: d.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${p}`)).join(''),
    message: d.message.replace(/"/g, ''),
  }));
}

/** Validates input against a joi schema; failures become 400 `validation_error` with details. */
export function validate<T>(schema: Joi.Schema, input: unknown, options: Joi.ValidationOptions = {}): T {
  const { error, value } = schema.validate(input, { abortEarly: false, convert: true, ...options });
  if (error) throw errors.validation(joiDetails(error));
  return value as T;
}

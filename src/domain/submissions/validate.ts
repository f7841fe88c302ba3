// Submission validation shared by the API and the hosted page (browser-safe: no Node imports).
import { isEmptyValue, ownValue, visibleFieldIds } from '../forms/logic';
import { matchesPattern, PATTERN_INPUT_MAX_LENGTH } from '../forms/patterns';
import type { Field, FieldType, FormStructure } from '../forms/types';
import { isPlainObject } from '../../lib/objects';
import { fileLimits, isUploadId, typeAccepted } from '../files/rules';

export interface FieldError { field: string; message: string }

export interface SubmissionCheck {
  /** Only visible, value-bearing fields that were given a non-empty value. */
  values: Record<string, unknown>;
  /** Visible required fields with an empty value, in form order. */
  missingRequired: Field[];
  /** Per-field type errors, and unknown keys (message 'Unknown field'). */
  errors: FieldError[];
}

export const SIGNATURE_MAX_LENGTH = 256 * 1024;
export const FILE_MAX_SIZE = 1024 * 1024;

type Validator = (field: Field, value: unknown) => string | null;

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const PHONE = /^\+?[\d\s()-]+$/;
const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const PNG_DATA_URL = /^data:image\/png;base64,[A-Za-z0-9+/]+={0,2}$/;
const DATA_URL = /^data:[^,]*,/;
const PAYMENT_INTENT = /^pi_[A-Za-z0-9_]+$/;

function optionValues(field: Field): string[] {
  const options: unknown = field.config.options;
  if (!Array.isArray(options)) return [];
  return options.filter(isPlainObject).map((option) => option.value).filter((v): v is string => typeof v === 'string');
}

function isOptionList(value: unknown, allowed: string[]): value is string[] {
  return Array.isArray(value)
    && value.every((item) => typeof item === 'string' && allowed.includes(item))
    && new Set(value).size === value.length;
}

function numericLimit(...candidates: unknown[]): number | null {
  const limits = candidates.filter((n): n is number => typeof n === 'number' && Number.isFinite(n));
  return limits.length ? Math.min(...limits) : null;
}

/** validationRules.minLength/maxLength/pattern, plus config.maxLength for the text types. */
function checkStringRules(field: Field, value: string, withConfigMax = false): string | null {
  const rules = field.validationRules;
  const minLength = numericLimit(rules.minLength);
  const maxLength = numericLimit(rules.maxLength, withConfigMax ? field.config.maxLength : undefined);
  if (minLength !== null && value.length < minLength) return `Must be at least ${minLength} characters`;
  if (maxLength !== null && value.length > maxLength) return `Must be at most ${maxLength} characters`;
  if (typeof rules.pattern === 'string') {
    if (value.length > PATTERN_INPUT_MAX_LENGTH) return `Must be at most ${PATTERN_INPUT_MAX_LENGTH} characters`;
    if (!matchesPattern(rules.pattern, value)) return 'Does not match the required format';
  }
  return null;
}

function stringValidator(message: string, test: (value: string) => boolean): Validator {
  return (field, value) => {
    if (typeof value !== 'string' || !test(value)) return message;
    return checkStringRules(field, value);
  };
}

function isHttpUrl(value: string): boolean {
  if (/\s/.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

function isPhone(value: string): boolean {
  const digits = value.replace(/\D/g, '').length;
  return PHONE.test(value) && digits >= 7 && digits <= 15;
}

function isCalendarDate(value: string): boolean {
  const match = ISO_DATE.exec(value);
  if (!match) return false;
  const [year, month, day] = match.slice(1).map(Number);
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function integerBetween(value: unknown, min: number, max: number): string | null {
  if (typeof value !== 'number' || !Number.isInteger(value)) return 'Must be a whole number';
  if (value < min || value > max) return `Must be between ${min} and ${max}`;
  return null;
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

const validateText: Validator = (field, value) =>
  typeof value === 'string' ? checkStringRules(field, value, true) : 'Must be text';

const validateNumber: Validator = (field, value) => {
  if (typeof value !== 'number' || !Number.isFinite(value)) return 'Must be a number';
  const { min, max } = field.validationRules;
  if (typeof min === 'number' && value < min) return `Must be at least ${min}`;
  if (typeof max === 'number' && value > max) return `Must be at most ${max}`;
  return null;
};

const validateOption: Validator = (field, value) =>
  typeof value === 'string' && optionValues(field).includes(value) ? null : 'Must be one of the offered options';

const validateCheckbox: Validator = (field, value) => {
  if (typeof value === 'boolean') return field.required && !value ? 'Must be checked' : null;
  const options = optionValues(field);
  if (options.length && isOptionList(value, options)) return null;
  return options.length ? 'Must be a list of the offered options' : 'Must be true or false';
};

const validateRanking: Validator = (field, value) => {
  const options = optionValues(field);
  return isOptionList(value, options) && value.length === options.length ? null : 'Must rank every option exactly once';
};

const NAME_PARTS = { full: ['fullName'], split: ['firstName', 'lastName'] } as const;

const validateName: Validator = (field, value) => {
  if (!isPlainObject(value) || (value.format !== 'full' && value.format !== 'split')) {
    return 'Must be a full or split name';
  }
  const configured: unknown = field.config.format;
  if ((configured === 'full' || configured === 'split') && configured !== value.format) {
    return configured === 'full' ? 'Must be a full name' : 'Must be a first and last name';
  }
  const parts: readonly string[] = NAME_PARTS[value.format];
  const keys = Object.keys(value).filter((key) => key !== 'format');
  const wellFormed = keys.every((key) => parts.includes(key)) && parts.every((part) => typeof value[part] === 'string');
  return wellFormed ? null : 'Must be a full or split name';
};

const validateSignature: Validator = (_field, value) =>
  typeof value === 'string' && value.length <= SIGNATURE_MAX_LENGTH && PNG_DATA_URL.test(value)
    ? null
    : 'Must be a PNG signature of at most 256 KB';

const FILE_KEYS = ['name', 'type', 'size', 'dataUrl'];

/** The file object of a file-upload field (openapi.yaml), its bytes inline as a data URL (up to the 1 MB body limit). */
function inlineFileProblem(field: Field, value: Record<string, unknown>): string | null {
  const wellFormed = Object.keys(value).every((key) => FILE_KEYS.includes(key))
    && typeof value.name === 'string' && value.name.trim() !== ''
    && typeof value.type === 'string'
    && typeof value.size === 'number' && Number.isInteger(value.size) && value.size >= 0
    && typeof value.dataUrl === 'string' && DATA_URL.test(value.dataUrl);
  if (!wellFormed) return FILE_SHAPE;
  if ((value.size as number) > FILE_MAX_SIZE) return 'File must be at most 1 MB';
  const { accept } = fileLimits(field, Number.MAX_SAFE_INTEGER);
  if (!typeAccepted(accept, value.name as string, value.type as string)) return 'File type is not accepted';
  return null;
}

const FILE_SHAPE = 'Must be an uploaded file ({"uploadId"}) or a file with name, type, size and data URL';

const isUploadRef = (value: unknown) => isPlainObject(value) && Object.keys(value).length === 1 && isUploadId(value.uploadId);

/**
 * `{uploadId}` (an upload the submission will claim; storing checks the upload itself), a list of
 * them up to the field's maxFiles, each once, or the inline data URL object.
 */
const validateFile: Validator = (field, value) => {
  if (Array.isArray(value)) {
    const { maxFiles } = fileLimits(field, Number.MAX_SAFE_INTEGER);
    if (!value.every(isUploadRef)) return FILE_SHAPE;
    if (value.length > maxFiles) return maxFiles === 1 ? 'Takes one file' : `Takes at most ${maxFiles} files`;
    if (new Set(value.map((v) => v.uploadId)).size !== value.length) return 'The same upload is named twice';
    return null;
  }
  if (!isPlainObject(value)) return FILE_SHAPE;
  if ('uploadId' in value) return isUploadRef(value) ? null : FILE_SHAPE;
  return inlineFileProblem(field, value);
};

const VALIDATORS: Record<FieldType, Validator> = {
  text: validateText,
  textarea: validateText,
  email: stringValidator('Must be a valid email address', (v) => v.length <= 254 && EMAIL.test(v)),
  url: stringValidator('Must be a valid http or https URL', isHttpUrl),
  phone: stringValidator('Must be a valid phone number', isPhone),
  number: validateNumber,
  date: (_field, value) => (typeof value === 'string' && isCalendarDate(value) ? null : 'Must be a date (YYYY-MM-DD)'),
  select: validateOption,
  radio: validateOption,
  'likert-score': validateOption,
  checkbox: validateCheckbox,
  rating: (field, value) => integerBetween(value, 1, numberOr(field.config.max, 5)),
  scale: (field, value) => integerBetween(value, numberOr(field.config.min, 1), numberOr(field.config.max, 10)),
  nps: (_field, value) => integerBetween(value, 0, 10),
  ranking: validateRanking,
  name: validateName,
  heading: () => 'Heading fields take no value',
  signature: validateSignature,
  'file-upload': validateFile,
  payment: (_field, value) =>
    typeof value === 'string' && value.length <= 255 && PAYMENT_INTENT.test(value) ? null : 'Must be a payment intent id',
};

/** The message for a value the field does not accept, or null when it is acceptable. */
export function validateFieldValue(field: Field, value: unknown): string | null {
  const validator = VALIDATORS[field.type];
  return validator ? validator(field, value) : 'Unsupported field type';
}

/**
 * Type checks come first, and visibility is computed only over the values that passed them: a
 * rule never reads an unchecked value (a megabyte array where a checkbox belongs).
 */
export function validateSubmission(structure: FormStructure, data: Record<string, unknown>): SubmissionCheck {
  const known = new Set(structure.fields.map((field) => field.id));
  const errors: FieldError[] = Object.keys(data)
    .filter((key) => !known.has(key))
    .map((key) => ({ field: key, message: 'Unknown field' }));
  const checked: Record<string, unknown> = Object.create(null);
  const typeErrors = new Map<string, string>();
  for (const field of structure.fields) {
    const value = ownValue(data, field.id);
    if (isEmptyValue(value)) continue;
    const message = validateFieldValue(field, value);
    if (message) typeErrors.set(field.id, message);
    else checked[field.id] = value;
  }

  const visible = visibleFieldIds(structure, checked);
  const values: Record<string, unknown> = {};
  const missingRequired: Field[] = [];
  for (const field of structure.fields) {
    if (!visible.has(field.id)) continue;
    const value = ownValue(data, field.id);
    if (isEmptyValue(value)) {
      if (field.required && field.type !== 'heading') missingRequired.push(field);
      continue;
    }
    const message = typeErrors.get(field.id);
    if (message) errors.push({ field: field.id, message });
    else values[field.id] = value;
  }
  return { values, missingRequired, errors };
}

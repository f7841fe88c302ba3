// Structural validation of a form's pages and fields (create form, replace structure). Server-side.
import Joi from 'joi';
import { MAX_FILES_LIMIT } from '../files/rules';
import { compilePattern } from './patterns';
import { FIELD_TYPES, OPERATORS } from './types';
import type { ConditionalLogic, Field, FormStructure, Page } from './types';

export interface StructureInput { pages?: unknown; fields?: unknown }
export interface StructureError { field: string; message: string }
export interface StructureResult { structure: FormStructure | null; errors: StructureError[] }

export const MAX_PAGES = 100;
export const MAX_FIELDS = 500;

const OPTION_TYPES = new Set(['select', 'radio', 'checkbox', 'likert-score', 'ranking']);
const TYPES_NEEDING_OPTIONS = new Set(['select', 'radio', 'likert-score', 'ranking']);
// Ids become object keys in submission data; these would touch the prototype instead.
const RESERVED_IDS = ['__proto__', 'constructor', 'prototype'];

const idSchema = Joi.string().min(1).max(64).pattern(/^[A-Za-z0-9_-]+$/).invalid(...RESERVED_IDS);

export const MAX_RULE_VALUE_LENGTH = 1_000;
/** Across all pages and fields of a form: bounds the work conditional logic costs per submission. */
export const MAX_LOGIC_RULES = 1_000;

const ruleScalar = [Joi.string().allow('').max(MAX_RULE_VALUE_LENGTH), Joi.number(), Joi.boolean()];

const ruleSchema = Joi.object({
  fieldId: idSchema.required(),
  operator: Joi.string().valid(...OPERATORS).required(),
  value: Joi.alternatives(...ruleScalar, Joi.array().items(...ruleScalar).max(200)).allow(null),
});

const logicSchema = Joi.object({
  show: Joi.boolean().required(),
  logic: Joi.string().valid('all', 'any').required(),
  rules: Joi.array().items(ruleSchema).max(50).required(),
}).allow(null);

const optionSchema = Joi.object({
  label: Joi.string().allow('').max(500).required(),
  value: Joi.string().min(1).max(500).required(),
});

function compilesInLinearTime(source: string, helpers: Joi.CustomHelpers): string | Joi.ErrorReport {
  const result = compilePattern(source);
  return result.ok ? source : helpers.message({ custom: result.message });
}

const configSchema = Joi.object({
  options: Joi.array().items(optionSchema).max(200),
  maxLength: Joi.number().integer().min(1),
  min: Joi.number().integer(),
  max: Joi.number().integer(),
  format: Joi.string().valid('full', 'split'),
  accept: Joi.array().items(Joi.string().max(255)),
  maxSize: Joi.number().integer().min(1),
  maxFiles: Joi.number().integer().min(1).max(MAX_FILES_LIMIT),
  amount: Joi.number().integer().min(1),
  currency: Joi.string().pattern(/^[A-Za-z]{3}$/),
  sensitive: Joi.boolean(),
}).unknown(true);

const validationRulesSchema = Joi.object({
  required: Joi.boolean(),
  minLength: Joi.number().integer().min(0),
  maxLength: Joi.number().integer().min(0),
  min: Joi.number(),
  max: Joi.number(),
  pattern: Joi.string().max(1000).custom(compilesInLinearTime),
}).unknown(true);

export const pageSchema: Joi.ObjectSchema = Joi.object({
  id: idSchema,
  title: Joi.string().allow('').max(500).required(),
  description: Joi.string().allow('', null).max(5000),
  order: Joi.number().integer().min(0),
  conditionalLogic: logicSchema,
});

export const fieldSchema: Joi.ObjectSchema = Joi.object({
  id: idSchema,
  type: Joi.string().valid(...FIELD_TYPES).required(),
  label: Joi.string().allow('').max(500).required(),
  placeholder: Joi.string().allow('', null).max(500),
  description: Joi.string().allow('', null).max(5000),
  required: Joi.boolean(),
  config: configSchema,
  validationRules: validationRulesSchema,
  order: Joi.number().integer().min(0),
  pageId: idSchema.allow(null),
  conditionalLogic: logicSchema,
  hidden: Joi.boolean(),
  prefillParam: Joi.string().pattern(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/),
});

const structureSchema = Joi.object({
  pages: Joi.array().items(pageSchema).max(MAX_PAGES).required(),
  fields: Joi.array().items(fieldSchema).max(MAX_FIELDS).required(),
});

/** Joi's path ['fields', 2, 'type'] as `fields[2].type`. */
function formatPath(path: (string | number)[]): string {
  return path.reduce<string>((text, part) => (typeof part === 'number' ? `${text}[${part}]` : text ? `${text}.${part}` : part), '');
}

function shapeErrors(input: unknown): StructureError[] {
  const { error } = structureSchema.validate(input, { abortEarly: false, convert: false, errors: { wrap: { label: false } } });
  return (error?.details ?? []).map((detail) => ({ field: formatPath(detail.path), message: detail.message }));
}

type RawPage = Partial<Page>;
type RawField = Partial<Field>;

function withPageDefaults(raw: RawPage, index: number, newId: (prefix: 'page') => string): Page {
  return {
    id: raw.id ?? newId('page'),
    title: raw.title as string,
    description: raw.description ?? null,
    order: raw.order ?? index,
    conditionalLogic: raw.conditionalLogic ?? null,
  };
}

function withFieldDefaults(raw: RawField, index: number, newId: (prefix: 'fld') => string): Field {
  const field: Field = {
    id: raw.id ?? newId('fld'),
    type: raw.type as Field['type'],
    label: raw.label as string,
    placeholder: raw.placeholder ?? null,
    description: raw.description ?? null,
    required: raw.required ?? false,
    config: raw.config ?? {},
    validationRules: raw.validationRules ?? {},
    order: raw.order ?? index,
    pageId: raw.pageId ?? null,
    conditionalLogic: raw.conditionalLogic ?? null,
  };
  if (raw.hidden !== undefined) field.hidden = raw.hidden;
  if (raw.prefillParam !== undefined) field.prefillParam = raw.prefillParam;
  return field;
}

function duplicateIdErrors(items: { id: string }[], collection: 'pages' | 'fields'): StructureError[] {
  const seen = new Set<string>();
  const errors: StructureError[] = [];
  items.forEach((item, i) => {
    if (seen.has(item.id)) errors.push({ field: `${collection}[${i}].id`, message: `Duplicate id ${item.id}` });
    seen.add(item.id);
  });
  return errors;
}

function logicErrors(
  logic: ConditionalLogic | null, path: string, fieldIds: Set<string>, ownId: string | null,
): StructureError[] {
  if (!logic) return [];
  return logic.rules.flatMap((rule, j) => {
    const at = `${path}.conditionalLogic.rules[${j}].fieldId`;
    if (rule.fieldId === ownId) return [{ field: at, message: 'A field cannot depend on itself' }];
    if (!fieldIds.has(rule.fieldId)) return [{ field: at, message: `Unknown field ${rule.fieldId}` }];
    return [];
  });
}

function optionErrors(field: Field, path: string): StructureError[] {
  if (!OPTION_TYPES.has(field.type)) return [];
  const options: { value: string }[] = field.config.options ?? [];
  if (TYPES_NEEDING_OPTIONS.has(field.type) && options.length === 0) {
    return [{ field: `${path}.config.options`, message: 'At least one option is required' }];
  }
  const seen = new Set<string>();
  return options.flatMap((option, k) => {
    const duplicate = seen.has(option.value);
    seen.add(option.value);
    return duplicate ? [{ field: `${path}.config.options[${k}].value`, message: 'Duplicate option value' }] : [];
  });
}

function typeConfigErrors(field: Field, path: string): StructureError[] {
  const { config } = field;
  const errors: StructureError[] = [];
  if (field.type === 'payment') {
    if (config.amount === undefined) errors.push({ field: `${path}.config.amount`, message: 'amount is required' });
    if (config.currency === undefined) errors.push({ field: `${path}.config.currency`, message: 'currency is required' });
  }
  if (field.type === 'scale' && (config.min ?? 1) >= (config.max ?? 10)) {
    errors.push({ field: `${path}.config.max`, message: 'max must be greater than min' });
  }
  if (field.type === 'rating' && config.max !== undefined && config.max < 1) {
    errors.push({ field: `${path}.config.max`, message: 'max must be at least 1' });
  }
  return errors;
}

// One payment intent backs one submission, so a form can charge only once.
function extraPaymentErrors(fields: Field[]): StructureError[] {
  const first = fields.findIndex((field) => field.type === 'payment');
  return fields.flatMap((field, i) => (field.type === 'payment' && i !== first
    ? [{ field: `fields[${i}].type`, message: 'A form can have only one payment field' }]
    : []));
}

function crossCheckErrors(pages: Page[], fields: Field[]): StructureError[] {
  const pageIds = new Set(pages.map((page) => page.id));
  const fieldIds = new Set(fields.map((field) => field.id));
  const errors = [...duplicateIdErrors(pages, 'pages'), ...duplicateIdErrors(fields, 'fields')];
  pages.forEach((page, i) => errors.push(...logicErrors(page.conditionalLogic, `pages[${i}]`, fieldIds, null)));
  fields.forEach((field, i) => {
    const path = `fields[${i}]`;
    if (field.pageId !== null && !pageIds.has(field.pageId)) {
      errors.push({ field: `${path}.pageId`, message: `Unknown page ${field.pageId}` });
    }
    errors.push(
      ...logicErrors(field.conditionalLogic, path, fieldIds, field.id),
      ...optionErrors(field, path),
      ...typeConfigErrors(field, path),
    );
  });
  return [...errors, ...extraPaymentErrors(fields), ...ruleCountErrors(pages, fields)];
}

function ruleCountErrors(pages: Page[], fields: Field[]): StructureError[] {
  const count = [...pages, ...fields].reduce((sum, item) => sum + (item.conditionalLogic?.rules.length ?? 0), 0);
  return count > MAX_LOGIC_RULES
    ? [{ field: 'fields', message: `A form can have at most ${MAX_LOGIC_RULES} conditional logic rules in all` }]
    : [];
}

const byOrder = (a: { order: number }, b: { order: number }) => a.order - b.order;

/** Validates a structure, fills its defaults and returns it sorted by order, or every error found. */
export function normalizeStructure(
  input: { pages: unknown; fields: unknown },
  newId: (prefix: 'fld' | 'page') => string,
): StructureResult {
  const shape = shapeErrors({ pages: input.pages, fields: input.fields });
  if (shape.length) return { structure: null, errors: shape };

  const pages = (input.pages as RawPage[]).map((raw, i) => withPageDefaults(raw, i, newId));
  const fields = (input.fields as RawField[]).map((raw, i) => withFieldDefaults(raw, i, newId));
  const errors = crossCheckErrors(pages, fields);
  if (errors.length) return { structure: null, errors };
  return { structure: { pages: [...pages].sort(byOrder), fields: [...fields].sort(byOrder) }, errors: [] };
}

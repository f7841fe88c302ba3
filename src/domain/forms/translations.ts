// A form's translations of its own texts (README.md "Languages"): per BCP 47 language tag, the
// title, description, submit button text and success message, page titles and descriptions, and
// field labels, placeholders, descriptions and option labels. Stored beside the texts (forms.translations), checked against the structure
// they translate, and laid over the texts per text for the public form. Values are never translated:
// a submission stores option values whatever language the page was in.
import Joi from 'joi';
import type { Field, FormStructure, Page } from './types';
import { MAX_FIELDS, MAX_PAGES, type StructureError } from './structure';

export interface PageTranslation { title?: string; description?: string }
export interface FieldTranslation {
  label?: string;
  placeholder?: string;
  description?: string;
  options?: Record<string, string>;
}
export interface FormTranslation {
  title?: string;
  description?: string;
  /** The form's own `settings.submitButtonText` and `settings.successMessage`, translated. */
  submitButtonText?: string;
  successMessage?: string;
  pages?: Record<string, PageTranslation>;
  fields?: Record<string, FieldTranslation>;
}
export type FormTranslations = Record<string, FormTranslation>;

export const MAX_TRANSLATION_LANGUAGES = 30;
/** Option labels one field's translation may hold: as many as a field may have options. */
export const MAX_TRANSLATED_OPTIONS = 200;
/** Problems named in one refusal: a body of thousands of unknown ids is refused with the first ones. */
export const MAX_TRANSLATION_ERRORS = 50;
const RESERVED = new Set(['__proto__', 'constructor', 'prototype']);

/** A well-formed BCP 47 tag (as Intl.getCanonicalLocales accepts it), at most 35 characters. */
export function isLanguageTag(tag: string): boolean {
  if (tag.length < 2 || tag.length > 35 || !/^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$/.test(tag)) return false;
  try {
    return Intl.getCanonicalLocales(tag).length === 1;
  } catch {
    return false;
  }
}

const text = (max: number) => Joi.string().max(max);
const translationSchema = Joi.object({
  title: text(500),
  description: text(5000).allow(''),
  submitButtonText: text(100).allow(''),
  successMessage: text(2000).allow(''),
  pages: Joi.object().pattern(Joi.string(), Joi.object({ title: text(500).allow(''), description: text(5000).allow('') })).max(MAX_PAGES),
  fields: Joi.object().pattern(Joi.string(), Joi.object({
    label: text(500).allow(''),
    placeholder: text(500).allow(''),
    description: text(5000).allow(''),
    options: Joi.object().pattern(Joi.string(), text(500).allow('')).max(MAX_TRANSLATED_OPTIONS),
  })).max(MAX_FIELDS),
});
const translationsSchema = Joi.object().pattern(Joi.string(), translationSchema).max(MAX_TRANSLATION_LANGUAGES);

function formatPath(path: (string | number)[]): string {
  return path.map(String).join('.');
}

function optionValues(field: Field): Set<string> {
  const options: unknown = field.config?.options;
  return new Set(Array.isArray(options) ? options.map((option) => option?.value).filter((v): v is string => typeof v === 'string') : []);
}

/**
 * Problems of `input` as the translations of `structure` (path and message, as structure errors
 * are reported): a tag that is not BCP 47, a page, field or option value the structure does not
 * have, options on a field that has none, text too long; at most MAX_TRANSLATION_ERRORS of them,
 * and no more pages, fields or options than a structure may have. None: it may be stored as it is.
 */
export function translationErrors(input: unknown, structure: FormStructure): StructureError[] {
  return allTranslationErrors(input, structure).slice(0, MAX_TRANSLATION_ERRORS);
}

function allTranslationErrors(input: unknown, structure: FormStructure): StructureError[] {
  const { error } = translationsSchema.validate(input, { abortEarly: false, convert: false, errors: { wrap: { label: false } } });
  const errors: StructureError[] = (error?.details ?? []).map((detail) => ({
    field: formatPath(['translations', ...detail.path]), message: detail.message,
  }));
  if (errors.length || !input || typeof input !== 'object') return errors;
  const pages = new Set(structure.pages.map((page) => page.id));
  const fields = new Map(structure.fields.map((field) => [field.id, field]));
  for (const [tag, translation] of Object.entries(input as FormTranslations)) {
    const at = `translations.${tag}`;
    if (!isLanguageTag(tag)) errors.push({ field: at, message: `${tag} is not a BCP 47 language tag` });
    for (const pageId of Object.keys(translation.pages ?? {})) {
      if (!pages.has(pageId)) errors.push({ field: `${at}.pages.${pageId}`, message: `Unknown page ${pageId}` });
    }
    for (const [fieldId, field] of Object.entries(translation.fields ?? {})) {
      const known = fields.get(fieldId);
      if (!known) {
        errors.push({ field: `${at}.fields.${fieldId}`, message: `Unknown field ${fieldId}` });
        continue;
      }
      const values = optionValues(known);
      for (const value of Object.keys(field.options ?? {})) {
        if (!values.has(value)) errors.push({ field: `${at}.fields.${fieldId}.options.${value}`, message: `Field ${fieldId} has no option ${value}` });
      }
    }
  }
  return errors;
}

/**
 * The stored translations still fitting a new structure (PUT /structure without `translations`):
 * what names a page, field or option the structure no longer has is dropped, the rest kept.
 */
export function keptTranslations(stored: FormTranslations | null | undefined, structure: FormStructure): FormTranslations {
  const pages = new Set(structure.pages.map((page) => page.id));
  const fields = new Map(structure.fields.map((field) => [field.id, field]));
  const kept: FormTranslations = {};
  for (const [tag, translation] of Object.entries(stored ?? {})) {
    const next: FormTranslation = { ...translation };
    if (translation.pages) {
      next.pages = Object.fromEntries(Object.entries(translation.pages).filter(([id]) => pages.has(id)));
    }
    if (translation.fields) {
      next.fields = {};
      for (const [id, field] of Object.entries(translation.fields)) {
        const known = fields.get(id);
        if (!known) continue;
        const values = optionValues(known);
        const options = Object.fromEntries(Object.entries(field.options ?? {}).filter(([value]) => values.has(value)));
        next.fields[id] = { ...field, ...(field.options ? { options } : {}) };
      }
    }
    kept[tag] = next;
  }
  return kept;
}

/**
 * The translation for `language` (a primary subtag like `fr`): the tag the respondent asked for
 * (`requested`, e.g. `fr-CA`) when the form has it, else `fr` itself, else the first `fr-*` one.
 */
export function translationFor(
  translations: FormTranslations | null | undefined, language: string, requested: string | null = null,
): FormTranslation | null {
  if (!translations) return null;
  const wanted = language.toLowerCase();
  const asked = requested?.trim().toLowerCase().replace(/_/g, '-') ?? null;
  const tags = Object.keys(translations);
  const named = asked ? tags.find((tag) => tag.toLowerCase() === asked && tag.toLowerCase().split('-')[0] === wanted) : undefined;
  const exact = tags.find((tag) => tag.toLowerCase() === wanted);
  const regional = tags.find((tag) => tag.toLowerCase().split('-')[0] === wanted);
  const tag = named ?? exact ?? regional;
  return tag && !RESERVED.has(tag) ? translations[tag] : null;
}

function own<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record && !RESERVED.has(key) && Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
}

/** A non-empty translated text, else the original: the fallback is per text. */
function pick(translated: string | undefined, original: string): string;
function pick(translated: string | undefined, original: string | null): string | null;
function pick(translated: string | undefined, original: string | null): string | null {
  return typeof translated === 'string' && translated.trim() !== '' ? translated : original;
}

/**
 * The form's own submit button text and success message in the translation's language: translated
 * where the translation has them; else, where the form sets its own, that one; else null (the
 * page's language's default words apply).
 */
export function translatedSettingsTexts(
  settings: { submitButtonText: string | null; successMessage: string | null }, translation: FormTranslation | null,
): { submitButtonText: string | null; successMessage: string | null } {
  return {
    submitButtonText: pick(translation?.submitButtonText, settings.submitButtonText),
    successMessage: pick(translation?.successMessage, settings.successMessage),
  };
}

export function translatePage(page: Page, translation: FormTranslation | null): Page {
  const t = own(translation?.pages, page.id);
  return t ? { ...page, title: pick(t.title, page.title), description: pick(t.description, page.description) } : page;
}

export function translateField(field: Field, translation: FormTranslation | null): Field {
  const t = own(translation?.fields, field.id);
  if (!t) return field;
  const options: unknown = field.config?.options;
  const translatedOptions = Array.isArray(options) && t.options
    ? options.map((option) => (option && typeof option === 'object' && typeof option.value === 'string'
      ? { ...option, label: pick(own(t.options, option.value), option.label) }
      : option))
    : options;
  return {
    ...field,
    label: pick(t.label, field.label),
    placeholder: pick(t.placeholder, field.placeholder),
    description: pick(t.description, field.description),
    config: Array.isArray(options) && t.options ? { ...field.config, options: translatedOptions } : field.config,
  };
}

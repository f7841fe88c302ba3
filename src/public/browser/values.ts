// Pure rules of the hosted page: prefill parsing, submitter details, error wording (in the page's
// language, i18n.ts).
import type { FileLimits } from '../../domain/files/rules';
import { typeAccepted } from '../../domain/files/rules';
import type { Field } from '../../domain/forms/types';
import type { MessageKey } from '../../domain/public/messages';
import { bytes, language, list, t } from './i18n';

function optionValues(field: Field): string[] {
  const options: unknown = field.config.options;
  if (!Array.isArray(options)) return [];
  return options
    .map((option) => (option && typeof option === 'object' ? (option as { value?: unknown }).value : undefined))
    .filter((value): value is string => typeof value === 'string');
}

export function isSplitName(field: Field): boolean {
  return field.config.format === 'split';
}

const TRUE_WORDS = /^(?:1|true|yes|on)$/i;
const FALSE_WORDS = /^(?:0|false|no|off)$/i;

function prefillCheckbox(field: Field, raw: string[]): unknown {
  const options = optionValues(field);
  if (!options.length) {
    if (TRUE_WORDS.test(raw[0])) return true;
    return FALSE_WORDS.test(raw[0]) ? false : undefined;
  }
  const wanted = new Set(raw.flatMap((item) => item.split(',')).map((item) => item.trim()));
  const ticked = options.filter((option) => wanted.has(option));
  return ticked.length ? ticked : undefined;
}

/**
 * The value a field takes from its URL parameter (all occurrences of it, in order), or undefined
 * when the parameter does not fit the field. A full name is never split into parts.
 */
export function prefillValue(field: Field, raw: string[]): unknown {
  if (!raw.length) return undefined;
  const first = raw[0];
  switch (field.type) {
    case 'number':
    case 'rating':
    case 'scale':
    case 'nps': {
      const n = first.trim() === '' ? NaN : Number(first);
      return Number.isFinite(n) ? n : undefined;
    }
    case 'checkbox':
      return prefillCheckbox(field, raw);
    case 'select':
    case 'radio':
    case 'likert-score':
      return optionValues(field).includes(first) ? first : undefined;
    case 'name':
      return isSplitName(field) ? undefined : { format: 'full', fullName: first };
    case 'heading':
    case 'signature':
    case 'file-upload':
    case 'ranking':
      return undefined;
    default:
      return first;
  }
}

function nameText(value: unknown): string {
  if (!value || typeof value !== 'object') return '';
  const name = value as Record<string, unknown>;
  const parts = name.format === 'split' ? [name.firstName, name.lastName] : [name.fullName];
  return parts.filter((part): part is string => typeof part === 'string').join(' ').trim();
}

/**
 * submitterEmail/submitterName taken from the first answered email and name fields that are not
 * sensitive: those are sealed at rest, and the submitter details are stored in clear.
 */
export function submitterDetails(
  fields: Field[],
  values: Record<string, unknown>,
): { submitterEmail?: string; submitterName?: string } {
  const details: { submitterEmail?: string; submitterName?: string } = {};
  for (const field of fields) {
    if (field.config?.sensitive === true) continue;
    const value = values[field.id];
    if (field.type === 'email' && typeof value === 'string' && !details.submitterEmail) {
      details.submitterEmail = value;
    }
    if (field.type === 'name' && !details.submitterName) {
      const name = nameText(value);
      if (name) details.submitterName = name;
    }
  }
  return details;
}

function retryWait(retryAfter: string | null): string {
  const seconds = retryAfter === null ? NaN : Number(retryAfter);
  if (!Number.isFinite(seconds) || seconds <= 0) return t('waitMoment');
  if (seconds <= 90) return t('waitSeconds', { count: Math.ceil(seconds) });
  return t('waitMinutes', { count: Math.ceil(seconds / 60) });
}

const FAILURE_KEYS: Record<number, MessageKey> = {
  400: 'failure400', 402: 'failure402', 404: 'failure404', 409: 'failure409', 413: 'failure413', 422: 'failure422', 503: 'failure503',
};

/** What to tell a person whose submission was refused with `status` (not a field-level 422). */
export function failureMessage(status: number, retryAfter: string | null = null): string {
  if (status === 429) return t('failure429', { wait: retryWait(retryAfter) });
  return t(FAILURE_KEYS[status] ?? 'failure500');
}

export function networkFailure(): string {
  return t('networkFailure');
}

export { safeRedirectUrl } from './urls';

/** The type a file is declared with: the browser's guess, or the generic one when it has none. */
export function declaredType(file: { type: string }): string {
  return file.type || 'application/octet-stream';
}

const TYPE_WORDS: Record<string, MessageKey> = { 'image/*': 'typeImages', 'video/*': 'typeVideos', 'audio/*': 'typeAudio', 'text/*': 'typeText' };

/** The accepted types in words: `["image/*", ".pdf"]` is "images, PDF". */
export function acceptedText(accept: string[]): string {
  const words = accept.map((entry) => (Object.prototype.hasOwnProperty.call(TYPE_WORDS, entry) ? t(TYPE_WORDS[entry]) : null)
    ?? (entry.startsWith('.') ? entry.slice(1) : entry.split('/').pop() ?? entry).toUpperCase());
  return list([...new Set(words)]);
}

/** Why the field refuses a file before anything is sent, or null when it may be uploaded. */
export function fileRefusal(limits: FileLimits, file: { name: string; type: string; size: number }): string | null {
  if (!typeAccepted(limits.accept, file.name, declaredType(file))) {
    return t('fileWrongType', { name: file.name, types: acceptedText(limits.accept) });
  }
  if (file.size > limits.maxSize) {
    return t('fileTooLarge', { name: file.name, size: formatBytes(file.size), limit: formatBytes(limits.maxSize) });
  }
  if (file.size === 0) return t('fileEmpty', { name: file.name });
  return null;
}

/** The line under a file input that says what it takes. */
export function uploadHint(limits: FileLimits): string {
  const parts = [t(limits.maxFiles > 1 ? 'hintSizeEach' : 'hintSize', { size: formatBytes(limits.maxSize) })];
  if (limits.accept.length) parts.push(t('hintAccepted', { types: acceptedText(limits.accept) }));
  if (limits.maxFiles > 1) parts.push(t('hintFiles', { count: limits.maxFiles }));
  return parts.join(' ');
}

/** An upload that stopped moving (see UPLOAD_STALL_MS). */
export function uploadStalled(): string {
  return t('uploadStalled');
}

/** What to tell a person whose upload failed with `status` (0: the server could not be reached). */
export function uploadFailureMessage(status: number, retryAfter: string | null = null): string {
  if (status === 0) return networkFailure();
  if (status === 404) return failureMessage(404);
  if (status === 429) return t('uploadTooMany', { wait: retryWait(retryAfter) });
  return t('uploadFailed');
}

export function formatBytes(count: number): string {
  return bytes(count);
}

/** What a person is told about a required field left empty, in words that fit its control. */
export function requiredMessage(field: Field): string {
  switch (field.type) {
    case 'select':
    case 'radio':
    case 'likert-score':
    case 'rating':
    case 'scale':
    case 'nps':
      return t('requiredChoice');
    case 'checkbox':
      return t(optionValues(field).length ? 'requiredTickOne' : 'requiredTickBox');
    case 'file-upload':
      return t('requiredFile');
    case 'signature':
      return t('requiredSignature');
    default:
      return t('requiredAnswer');
  }
}

/** Stripe amounts are in the currency's minor unit. */
export function formatAmount(amount: unknown, currency: unknown): string | null {
  if (typeof amount !== 'number' || typeof currency !== 'string') return null;
  try {
    const format = new Intl.NumberFormat(language(), { style: 'currency', currency: currency.toUpperCase() });
    return format.format(amount / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 2));
  } catch {
    return null;
  }
}

/**
 * What a person is told when the form changed while they filled it in (409 form_changed): the page
 * shows the new version with every answer whose question is still there. All its wording is here.
 */
/** The notice's words, in the page's language (the catalogues' formChanged*). */
export const FORM_CHANGED_NOTICE = {
  get intro(): string { return t('formChanged'); },
  get added(): string { return t('formChangedAdded'); },
  get removed(): string { return t('formChangedRemoved'); },
  get reworded(): string { return t('formChangedReworded'); },
};

/** The notice for a form changed from `before` to `after` (pure): the intro, then what was added, removed or reworded. */
export function formChangedNotice(before: Field[], after: Field[]): string {
  const asked = (fields: Field[]) => fields.filter((field) => field.type !== 'heading' && !field.hidden);
  const old = new Map(asked(before).map((field) => [field.id, field]));
  const now = asked(after);
  const kept = new Set(now.map((field) => field.id));
  const added = now.filter((field) => !old.has(field.id)).map((field) => field.label);
  const removed = [...old.values()].filter((field) => !kept.has(field.id)).map((field) => field.label);
  const reworded = now.filter((field) => old.has(field.id) && old.get(field.id)!.label !== field.label)
    .map((field) => `${old.get(field.id)!.label} → ${field.label}`);
  const parts = [FORM_CHANGED_NOTICE.intro];
  if (added.length) parts.push(`${FORM_CHANGED_NOTICE.added} ${added.join(', ')}.`);
  if (removed.length) parts.push(`${FORM_CHANGED_NOTICE.removed} ${removed.join(', ')}.`);
  if (reworded.length) parts.push(`${FORM_CHANGED_NOTICE.reworded} ${reworded.join(', ')}.`);
  return parts.join(' ');
}

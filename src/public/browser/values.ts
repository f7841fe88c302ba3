// Pure rules of the hosted page: prefill parsing, submitter details, error wording.
import type { FileLimits } from '../../domain/files/rules';
import { typeAccepted } from '../../domain/files/rules';
import type { Field } from '../../domain/forms/types';

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
  if (!Number.isFinite(seconds) || seconds <= 0) return 'a moment';
  if (seconds <= 90) return `${Math.ceil(seconds)} seconds`;
  return `${Math.ceil(seconds / 60)} minutes`;
}

/** What to tell a person whose submission was refused with `status` (not a field-level 422). */
export function failureMessage(status: number, retryAfter: string | null = null): string {
  switch (status) {
    case 400:
      return 'Your answers could not be processed. Please check them and try again.';
    case 402:
      return 'This form is not accepting new responses at the moment. Please try again later.';
    case 404:
      return 'This form is no longer available.';
    case 409:
      return 'This payment has already been used for another submission.';
    case 413:
      return 'Your answers are too large to send. Please attach smaller files and try again.';
    case 422:
      return "We couldn't verify that you are not a robot. Please try again.";
    case 429:
      return `Too many submissions right now. Please wait ${retryWait(retryAfter)} and try again.`;
    case 503:
      return 'The service is temporarily unavailable. Please try again in a few moments.';
    default:
      return 'Something went wrong on our side. Please try again.';
  }
}

export const NETWORK_FAILURE = "We couldn't reach the server. Please check your connection and try again.";

/** Only http(s) destinations are followed after a submission. */
export function safeRedirectUrl(url: string | null | undefined, base: string): string | null {
  if (!url) return null;
  try {
    const target = new URL(url, base);
    return target.protocol === 'http:' || target.protocol === 'https:' ? target.href : null;
  } catch {
    return null;
  }
}

/** The type a file is declared with: the browser's guess, or the generic one when it has none. */
export function declaredType(file: { type: string }): string {
  return file.type || 'application/octet-stream';
}

const TYPE_WORDS: Record<string, string> = { 'image/*': 'images', 'video/*': 'videos', 'audio/*': 'audio files', 'text/*': 'text files' };

/** The accepted types in words: `["image/*", ".pdf"]` is "images, PDF". */
export function acceptedText(accept: string[]): string {
  const words = accept.map((entry) => TYPE_WORDS[entry]
    ?? (entry.startsWith('.') ? entry.slice(1) : entry.split('/').pop() ?? entry).toUpperCase());
  return [...new Set(words)].join(', ');
}

/** Why the field refuses a file before anything is sent, or null when it may be uploaded. */
export function fileRefusal(limits: FileLimits, file: { name: string; type: string; size: number }): string | null {
  if (!typeAccepted(limits.accept, file.name, declaredType(file))) {
    return `${file.name} can't be attached: this question accepts ${acceptedText(limits.accept)} only.`;
  }
  if (file.size > limits.maxSize) {
    return `${file.name} is ${formatBytes(file.size)}, larger than the ${formatBytes(limits.maxSize)} limit. Please choose a smaller file.`;
  }
  if (file.size === 0) return `${file.name} is empty. Please choose another file.`;
  return null;
}

/** The line under a file input that says what it takes. */
export function uploadHint(limits: FileLimits): string {
  const parts = [`Up to ${formatBytes(limits.maxSize)}${limits.maxFiles > 1 ? ' each' : ''}.`];
  if (limits.accept.length) parts.push(`Accepted: ${acceptedText(limits.accept)}.`);
  if (limits.maxFiles > 1) parts.push(`Up to ${limits.maxFiles} files.`);
  return parts.join(' ');
}

/** An upload that stopped moving (see UPLOAD_STALL_MS). */
export const UPLOAD_STALLED = 'The upload stopped moving. Please check your connection and try again.';

/** What to tell a person whose upload failed with `status` (0: the server could not be reached). */
export function uploadFailureMessage(status: number, retryAfter: string | null = null): string {
  if (status === 0) return NETWORK_FAILURE;
  if (status === 404) return failureMessage(404);
  if (status === 429) return `Too many uploads right now. Please wait ${retryWait(retryAfter)} and try again.`;
  return 'The upload did not go through. Please try again.';
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
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
      return 'Please choose an answer.';
    case 'checkbox':
      return optionValues(field).length ? 'Please tick at least one option.' : 'Please tick this box to continue.';
    case 'file-upload':
      return 'Please choose a file.';
    case 'signature':
      return 'Please sign, or type your name.';
    default:
      return 'This field is required.';
  }
}

/** Stripe amounts are in the currency's minor unit. */
export function formatAmount(amount: unknown, currency: unknown): string | null {
  if (typeof amount !== 'number' || typeof currency !== 'string') return null;
  try {
    const format = new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() });
    return format.format(amount / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 2));
  } catch {
    return null;
  }
}

/**
 * What a person is told when the form changed while they filled it in (409 form_changed): the page
 * shows the new version with every answer whose question is still there. All its wording is here.
 */
export const FORM_CHANGED_NOTICE = {
  intro: 'This form was updated while you were filling it in. Your answers to the questions that are still there have been kept; please check the form and send it again.',
  added: 'New:',
  removed: 'No longer asked:',
  reworded: 'Reworded:',
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

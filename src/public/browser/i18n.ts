// The hosted page's words: the catalogue of the page's language (src/domain/public/messages/), chosen
// by the server (README.md "Languages"), named by the public form's `language` and `<html lang>`,
// and carried by the page itself (`#form-words`, hosted-page.ts): the bundle holds English only.
// Every text the page writes goes through `t`; the shared validator's English messages through
// `problemText`.
import { en } from '../../domain/public/messages/en';
import { DEFAULT_LANGUAGE, isLanguage, translatorOf, type Language, type Params, type Translator } from '../../domain/public/messages/translator';
import type { MessageKey, Messages } from '../../domain/public/messages/types';

let current: Translator = translatorOf(DEFAULT_LANGUAGE, en);

/**
 * Chooses the page's language once, before anything is rendered, with the words the page carries
 * for it; a word they lack (or words of another language) is said in English.
 */
export function useLanguage(language: unknown, words: unknown = null): Language {
  const chosen = isLanguage(language) ? language : DEFAULT_LANGUAGE;
  const given = chosen !== DEFAULT_LANGUAGE && words && typeof words === 'object' ? words as Partial<Messages> : {};
  current = translatorOf(chosen, { ...en, ...given });
  return current.language;
}

export function t(key: MessageKey, params?: Params): string {
  return current.t(key, params);
}

export function bytes(value: number): string {
  return current.bytes(value);
}

export function number(value: number): string {
  return current.number(value);
}

export function list(items: string[]): string {
  return current.list(items);
}

export function language(): Language {
  return current.language;
}

const EXACT: Record<string, MessageKey> = {
  'Must be a valid email address': 'invalidEmail',
  'Must be a valid http or https URL': 'invalidUrl',
  'Must be a valid phone number': 'invalidPhone',
  'Must be a date (YYYY-MM-DD)': 'invalidDate',
  'Must be a number': 'invalidNumber',
  'Must be a whole number': 'invalidWholeNumber',
  'Must be text': 'invalidText',
  'Must be one of the offered options': 'invalidOption',
  'Must be a list of the offered options': 'invalidOption',
  'Must be true or false': 'mustBeChecked',
  'Must be checked': 'mustBeChecked',
  'Does not match the required format': 'invalidPattern',
  'Must rank every option exactly once': 'rankAll',
  'Must be a full or split name': 'invalidName',
  'Must be a full name': 'invalidName',
  'Must be a first and last name': 'invalidName',
  'Must be a PNG signature of at most 256 KB': 'invalidSignature',
  'File type is not accepted': 'invalidFileType',
  'Must be an uploaded file ({"uploadId"}) or a file with name, type, size and data URL': 'invalidFile',
  'The same upload is named twice': 'sameUpload',
  'Must be a payment intent id': 'invalidPayment',
  'Unknown field': 'unknownField',
  'Takes one file': 'takesFiles',
};

const NUMBER = '(-?\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)';
const PATTERNS: Array<[RegExp, (match: RegExpExecArray) => string]> = [
  [new RegExp(`^Must be at least ${NUMBER} characters$`), (m) => t('tooShort', { count: Number(m[1]) })],
  [new RegExp(`^Must be at most ${NUMBER} characters$`), (m) => t('tooLong', { count: Number(m[1]) })],
  [new RegExp(`^Must be between ${NUMBER} and ${NUMBER}$`), (m) => t('between', { min: Number(m[1]), max: Number(m[2]) })],
  [new RegExp(`^Must be at least ${NUMBER}$`), (m) => t('atLeast', { min: Number(m[1]) })],
  [new RegExp(`^Must be at most ${NUMBER}$`), (m) => t('atMost', { max: Number(m[1]) })],
  [/^Takes at most (\d+) files$/, (m) => t('takesFiles', { count: Number(m[1]) })],
  [/^File must be at most 1 MB$/, () => t('fileAtMost', { size: bytes(1024 * 1024) })],
];

/**
 * A message of the shared validator (src/domain/submissions/validate.ts, which the server answers
 * with too) in the page's language; a message it does not know stays as it came.
 */
export function problemText(message: string): string {
  const key = Object.prototype.hasOwnProperty.call(EXACT, message) ? EXACT[message] : undefined;
  if (key) return t(key, key === 'takesFiles' ? { count: 1 } : undefined);
  for (const [pattern, word] of PATTERNS) {
    const match = pattern.exec(message);
    if (match) return word(match);
  }
  return message;
}

/** A whole percentage (0–100) as the language writes it ("42 %", "42%", "٤٢٪"). */
export function percentText(value: number): string {
  return current.number(value / 100, { style: 'percent', maximumFractionDigits: 0 });
}

// The translator that fills a catalogue's {placeholders}: numbers through Intl.NumberFormat, plurals
// through Intl.PluralRules of the language. Imports no catalogue: the hosted page's bundle gets the
// words of its one language from the page (hosted-page.ts), not all ten.
import type { MessageKey, Messages, PluralForms } from './types';

export const LANGUAGES = ['en', 'fr', 'de', 'es', 'pt', 'it', 'nl', 'pl', 'ja', 'ar'] as const;
export type Language = (typeof LANGUAGES)[number];
export const DEFAULT_LANGUAGE: Language = 'en';

const RIGHT_TO_LEFT: ReadonlySet<Language> = new Set<Language>(['ar']);

export function isLanguage(value: unknown): value is Language {
  return typeof value === 'string' && (LANGUAGES as readonly string[]).includes(value);
}

export function textDirection(language: Language): 'ltr' | 'rtl' {
  return RIGHT_TO_LEFT.has(language) ? 'rtl' : 'ltr';
}

export type Params = Record<string, string | number>;

const PLACEHOLDER = /\{(\w+)\}/g;

export interface Translator {
  readonly language: Language;
  readonly dir: 'ltr' | 'rtl';
  /** The message `key` with its {placeholders} filled; a plural picks its form by `params.count`. */
  t(key: MessageKey, params?: Params): string;
  /** A number as the language writes it. */
  number(value: number, options?: Intl.NumberFormatOptions): string;
  /** A byte count in B, kB or MB, as the language writes it. */
  bytes(value: number): string;
  /** Items joined as the language lists them. */
  list(items: string[]): string;
}

/** The translator of `language` with its catalogue `messages`. */
export function translatorOf(language: Language, messages: Messages): Translator {
  const plurals = new Intl.PluralRules(language);
  const numberFormat = new Intl.NumberFormat(language);
  const number = (value: number, options?: Intl.NumberFormatOptions): string =>
    (options ? new Intl.NumberFormat(language, options) : numberFormat).format(value);
  const fill = (text: string, params: Params): string =>
    text.replace(PLACEHOLDER, (whole, name: string) => {
      const value = params[name];
      if (value === undefined) return whole;
      return typeof value === 'number' ? number(value) : value;
    });
  return {
    language,
    dir: textDirection(language),
    t(key, params = {}) {
      const message = messages[key] as string | PluralForms;
      if (typeof message === 'string') return fill(message, params);
      const count = typeof params.count === 'number' ? params.count : 0;
      const form = plurals.select(count) as keyof PluralForms;
      return fill(message[form] ?? message.other, params);
    },
    number,
    bytes(value) {
      if (value < 1024) return number(value, { style: 'unit', unit: 'byte', unitDisplay: 'long' });
      if (value < 1024 * 1024) return number(Math.round(value / 1024), { style: 'unit', unit: 'kilobyte', unitDisplay: 'short' });
      return number(value / (1024 * 1024), { style: 'unit', unit: 'megabyte', unitDisplay: 'short', minimumFractionDigits: 1, maximumFractionDigits: 1 });
    },
    list(items) {
      return items.join(messages.listSeparator);
    },
  };
}

/** The {placeholders} a text names, sorted (the catalogue test compares them across languages). */
export function placeholdersOf(text: string): string[] {
  return [...new Set([...text.matchAll(PLACEHOLDER)].map((match) => match[1]))].sort();
}

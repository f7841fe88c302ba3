// The hosted page's and the embed's words, one catalogue per language (one file each), and the
// translator that fills their {placeholders} (translator.ts). Pure and browser-safe, but the hosted
// page's bundle imports translator.ts and en.ts only: the page carries its language's catalogue.
import { ar } from './ar';
import { de } from './de';
import { en } from './en';
import { es } from './es';
import { fr } from './fr';
import { it } from './it';
import { ja } from './ja';
import { nl } from './nl';
import { pl } from './pl';
import { pt } from './pt';
import { translatorOf, type Language, type Translator } from './translator';
import type { Messages } from './types';

export type { MessageKey, Messages, PluralForms } from './types';
export {
  DEFAULT_LANGUAGE, isLanguage, LANGUAGES, placeholdersOf, textDirection, translatorOf, type Language, type Params, type Translator,
} from './translator';

export const CATALOGUES: Record<Language, Messages> = { en, fr, de, es, pt, it, nl, pl, ja, ar };

export function translator(language: Language): Translator {
  return translatorOf(language, CATALOGUES[language]);
}

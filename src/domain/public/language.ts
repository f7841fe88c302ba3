// Which language the hosted page speaks (see README.md "Languages"): `?lang=` on the page URL, else
// the form's `settings.language`, else the browser's Accept-Language (q-values; a region falls back
// to its language, fr-FR → fr), else English. Pure: unit-tested in test/unit/language.test.ts.
import { DEFAULT_LANGUAGE, isLanguage, type Language } from './messages';

/** The supported language a tag names (`fr`, `fr-FR`, `FR_ca`), or null. */
export function supportedLanguage(tag: unknown): Language | null {
  if (typeof tag !== 'string' || tag.length > 35) return null;
  const primary = tag.trim().toLowerCase().split(/[-_]/)[0];
  return isLanguage(primary) ? primary : null;
}

/** Accept-Language's tags with a q above 0, best first (ties keep the header's order); at most 20 read. */
export function acceptedLanguages(header: string | null | undefined): string[] {
  if (!header || typeof header !== 'string') return [];
  const entries = header.slice(0, 1000).split(',').slice(0, 20).map((part, index) => {
    const [tag, ...params] = part.trim().split(';');
    let q = 1;
    for (const param of params) {
      const [name, value] = param.trim().split('=');
      if (name?.trim().toLowerCase() === 'q') {
        const parsed = Number(value);
        q = Number.isFinite(parsed) && parsed >= 0 && parsed <= 1 ? parsed : 0;
      }
    }
    return { tag: tag.trim(), q, index };
  });
  return entries
    .filter((entry) => entry.tag !== '' && entry.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index)
    .map((entry) => entry.tag);
}

/** The first supported language of an Accept-Language header, or null (`*` names none). */
export function languageFromHeader(header: string | null | undefined): Language | null {
  for (const tag of acceptedLanguages(header)) {
    const language = supportedLanguage(tag);
    if (language) return language;
  }
  return null;
}

export interface LanguageSources {
  /** `?lang=` of the page URL (a request for an unsupported language is passed over). */
  query?: unknown;
  /** The form's `settings.language`, when it pins one. */
  pinned?: unknown;
  acceptLanguage?: string | null;
}

export function resolveLanguage(sources: LanguageSources): Language {
  return supportedLanguage(sources.query)
    ?? supportedLanguage(sources.pinned)
    ?? languageFromHeader(sources.acceptLanguage)
    ?? DEFAULT_LANGUAGE;
}

/**
 * The tag the respondent asked for in `language` (`?lang=`, else Accept-Language's best tag of that
 * language): `pt-BR` when the page speaks `pt`, so a form's `pt-BR` translation is preferred to its
 * `pt-PT` one. Null when no source names a tag of that language.
 */
export function requestedTag(sources: LanguageSources, language: Language): string | null {
  const candidates = [typeof sources.query === 'string' ? sources.query : null, ...acceptedLanguages(sources.acceptLanguage)];
  return candidates.find((tag): tag is string => !!tag && supportedLanguage(tag) === language) ?? null;
}

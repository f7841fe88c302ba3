// submitterName / submitterEmail are stored in clear and shown on every read: they must never
// repeat what a sensitive field holds (that is sealed and read back as `Redacted`).
import type { Field } from '../forms/types';

function normalized(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim();
}

/** The texts a sensitive value holds: a string, or each part of a name and the whole name. */
function sensitiveTexts(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (!value || typeof value !== 'object' || Array.isArray(value)) return [];
  const parts = Object.entries(value as Record<string, unknown>)
    .filter(([key, part]) => key !== 'format' && typeof part === 'string')
    .map(([, part]) => part as string);
  return [...parts, parts.join(' ')];
}

function repeatsAny(candidate: string, texts: string[]): boolean {
  const text = normalized(candidate);
  // One- and two-letter parts (initials) would match nearly every name.
  return texts.some((sensitive) => sensitive.length > 2 && text.includes(sensitive));
}

/** The submitter details to store: each one that repeats a sensitive answer is dropped. */
export function submitterDetailsToStore(
  fields: readonly Field[], values: Record<string, unknown>,
  details: { submitterEmail: string | null; submitterName: string | null },
): { submitterEmail: string | null; submitterName: string | null } {
  const texts = fields
    .filter((field) => field.config?.sensitive === true && Object.prototype.hasOwnProperty.call(values, field.id))
    .flatMap((field) => sensitiveTexts(values[field.id]))
    .map(normalized);
  if (!texts.length) return details;
  return {
    submitterEmail: details.submitterEmail !== null && repeatsAny(details.submitterEmail, texts) ? null : details.submitterEmail,
    submitterName: details.submitterName !== null && repeatsAny(details.submitterName, texts) ? null : details.submitterName,
  };
}

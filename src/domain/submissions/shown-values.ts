import type { FileLinks } from '../files/links';
import type { Field } from '../forms/types';
import { isSealedValue } from './sealed-values';

// How stored values are shown: by reads, the change feed, the export and webhook events.

export const REDACTED = 'Redacted';

/** Sealed (sensitive) values are never shown by ordinary reads. */
export function redact(data: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, isSealedValue(v) ? REDACTED : v]));
}

/** Values as every read shows them: sensitive ones `Redacted`, files as `{name, type, size, url}` with a fresh link. */
export function shownValues(data: Record<string, unknown>, links: FileLinks): Record<string, unknown> {
  return links.presentValues(redact(data));
}

/** Keys by the field's current label; a deleted field keeps its id; a repeated label gets its id appended. */
export function keyByLabel(data: Record<string, unknown>, fields: Field[]): Record<string, unknown> {
  const labels = new Map(fields.map((f) => [f.id, f.label]));
  const out: Record<string, unknown> = {};
  for (const [id, value] of Object.entries(data)) {
    const label = labels.get(id) || id;
    out[label in out ? `${label} (${id})` : label] = value;
  }
  return out;
}

/**
 * Dates and date-times the API reads from a query or a body (`startDate`, `endDate`, `since`,
 * `until`): ISO 8601, and a date-time without an offset is UTC, whatever the server's time zone
 * (JavaScript's `Date.parse` reads it as local time, so the same URL would list different rows on
 * two servers). openapi.yaml's `DateOrDateTime` and `UtcDateTime` say so.
 */
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}:?\d{2})?$/i;

/** Whether `value` is a date alone (`2026-11-01`): it then means a whole UTC day. */
export function isDateOnly(value: string): boolean {
  return DATE_ONLY.test(value);
}

/**
 * The instant an ISO 8601 date (its UTC midnight) or date-time names, with UTC where it gives no
 * offset; null when it is neither, or names no real time (month 13, hour 25).
 */
export function parseUtcInstant(value: string): Date | null {
  if (DATE_ONLY.test(value)) return realDay(value) ? new Date(`${value}T00:00:00Z`) : null;
  const match = DATE_TIME.exec(value);
  if (!match || !realDay(match[1].slice(0, 10))) return null;
  const at = Date.parse(`${match[1]}${match[2] ? match[2].toUpperCase() : 'Z'}`);
  return Number.isNaN(at) ? null : new Date(at);
}

/** `Date.parse` takes 2026-02-30 for March 2nd: a day must read back as itself. */
function realDay(day: string): boolean {
  const at = Date.parse(`${day}T00:00:00Z`);
  return !Number.isNaN(at) && new Date(at).toISOString().slice(0, 10) === day;
}

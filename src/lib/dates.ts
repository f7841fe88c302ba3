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
  if (DATE_ONLY.test(value)) return realDay(value) && !value.startsWith('0000') ? new Date(`${value}T00:00:00Z`) : null;
  const match = DATE_TIME.exec(value);
  if (!match || !realDay(match[1].slice(0, 10))) return null;
  const at = Date.parse(`${match[1]}${match[2] ? match[2].toUpperCase() : 'Z'}`);
  return Number.isNaN(at) || at < FIRST_INSTANT || at > LAST_INSTANT ? null : new Date(at);
}

/** `Date.parse` takes 2026-02-30 for March 2nd: a day must read back as itself. */
function realDay(day: string): boolean {
  const at = Date.parse(`${day}T00:00:00Z`);
  return !Number.isNaN(at) && new Date(at).toISOString().slice(0, 10) === day;
}

/**
 * The instants `toISOString` writes as PostgreSQL reads them: years 0001 to 9999 in UTC. Year 0000
 * (which an offset can also reach, `0001-01-01T00:00:00+05:00`) has no timestamp in PostgreSQL, and
 * year 10000 is written `+010000-…`, which it refuses: either would be a 500, not a 400.
 */
export const FIRST_INSTANT = new Date('0001-01-01T00:00:00Z').getTime();
export const LAST_INSTANT = new Date('9999-12-31T23:59:59.999Z').getTime();

import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes drawn from the system in 4 KiB blocks: one call into the CSPRNG per ~100 ids
 * instead of one per id (the same pooling crypto.randomUUID does). Each byte is used once.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++];
}

/** Uniformly random base62 string (rejection sampling avoids modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

export type IdPrefix = 'org' | 'key' | 'form' | 'sub' | 'fld' | 'page' | 'wh' | 'dlv' | 'evt' | 'crm' | 'upl' | 'grp';

export function newId(prefix: IdPrefix, length = 20): string {
  return `${prefix}_${randomBase62(length)}`;
}

const TIME_DIGITS = 8; // 62^8 ms: good until the year 8888

/** Fixed-width base62; the alphabet is in ASCII order, so text order is number order. */
function base62Fixed(value: number, width: number): string {
  let out = '';
  for (let rest = value; rest > 0; rest = Math.floor(rest / 62)) out = BASE62[rest % 62] + out;
  return out.padStart(width, '0');
}

/**
 * An id that sorts by creation time: 8 base62 characters of milliseconds since the epoch, then 12
 * random ones (71 bits apart within one millisecond), 20 in all like `newId`.
 */
export function newTimeOrderedId(prefix: IdPrefix, at: Date): string {
  return `${prefix}_${base62Fixed(at.getTime(), TIME_DIGITS)}${randomBase62(12)}`;
}

/** When a time-ordered id was made. */
export function timeOfId(id: string): Date {
  const digits = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 1 + TIME_DIGITS);
  return new Date([...digits].reduce((n, c) => n * 62 + BASE62.indexOf(c), 0));
}

/**
 * How far a row's `created_at` may lie from the time inside its time-ordered id. The service mints
 * a submission's id and its `created_at` from one `Date` in one process (create-submission.ts), so
 * the two are equal and clock skew between API processes moves both alike; the margin only covers
 * a writer that would take `created_at` from another clock (the database's `now()`, a restore),
 * which NTP keeps within seconds. An hour costs nothing: a window crosses into a second monthly
 * partition only within an hour of a month's edge.
 */
export const ID_TIME_MARGIN_MS = 3_600_000;

const TIME_ORDERED_ID = /^[a-z]+_[0-9A-Za-z]{20}$/;

/**
 * The `created_at` window of a row whose time-ordered id this is, [from, until), for statements on
 * a table partitioned by that column to name their partition; null for a text that cannot be such
 * an id (then nothing bounds it: the caller reads without the window).
 */
export function timeWindowOfId(id: string, marginMs = ID_TIME_MARGIN_MS): { from: Date; until: Date } | null {
  if (!TIME_ORDERED_ID.test(id)) return null;
  const at = timeOfId(id).getTime();
  return { from: new Date(at - marginMs), until: new Date(at + marginMs + 1) };
}

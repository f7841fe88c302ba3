import type { Em } from '../../db/orm';
import { deleteChangesOlderThan } from './change-records';

/** A place in the feed: after the change of transaction `xid` at `position` (decimal strings). */
export interface FeedPosition {
  xid: string;
  position: string;
}

/** An opaque feed position: base64url of `c2:<xid>:<position>`. */
export function encodeCursor(at: FeedPosition): string {
  return Buffer.from(`c2:${at.xid}:${at.position}`, 'utf8').toString('base64url');
}

const DECIMAL = '(0|[1-9][0-9]{0,19})';
const CURSOR_TEXT = new RegExp(`^(?:c2:${DECIMAL}:${DECIMAL}|c1:${DECIMAL})$`);
const MAX_XID = 18_446_744_073_709_551_615n;
const MAX_POSITION = 9_223_372_036_854_775_807n;

/**
 * The place a cursor names, or null when it is not one this service issued. A `c1:<position>`
 * cursor, issued before changes kept their transaction id, names the same place as before: the
 * changes written since the upgrade all have a higher transaction id than the ones before it (0).
 */
export function decodeCursor(cursor: string): FeedPosition | null {
  if (!/^[A-Za-z0-9_-]{1,80}$/.test(cursor)) return null;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = CURSOR_TEXT.exec(text);
  if (!match) return null;
  const at = match[3] !== undefined ? { xid: '0', position: match[3] } : { xid: match[1], position: match[2] };
  if (BigInt(at.xid) > MAX_XID || BigInt(at.position) > MAX_POSITION) return null;
  return Buffer.from(text, 'utf8').toString('base64url') === cursor ? at : null;
}

export const START_POSITION: FeedPosition = { xid: '0', position: '0' };

export const DEFAULT_CHANGE_RETENTION_DAYS = 30;
const PURGE_CHUNK = 10_000;

/** Removes changes older than the retention period, in chunks so no statement runs long. */
export async function purgeSubmissionChanges(em: Em, retentionDays = DEFAULT_CHANGE_RETENTION_DAYS): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await deleteChangesOlderThan(em, retentionDays, PURGE_CHUNK);
    total += deleted;
    if (deleted < PURGE_CHUNK) return total;
  }
}

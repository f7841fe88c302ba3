import type { Em } from '../../db/orm';
import { Webhook, type DeliveryStatus } from '../webhooks/entities';
import {
  readDeliveriesWithSideRows, readSideRowsWithoutDelivery, repairSideRows, type CreatedCursor, type DeliveryWithSideRows,
} from '../webhooks/store';

// The check and repair of the rows beside webhook deliveries (src/README.md, "Webhook deliveries and
// HOT updates") for the CLI's `deliveries check` and `deliveries repair`: the sweeps of owed work
// read only the owed rows and recovery only the failed rows, so a delivery changed by hand without
// them is never swept or recovered. The statements are in webhooks/store.ts.

/** The side rows of one delivery: the owed row's due time and the failed row's creation time (null: no row). */
export interface SideRows {
  owed: string | null;
  failed: string | null;
}

/** What a delivery's side rows must be: owed when it is due if pending, failed with its creation time if failed, none otherwise or when it is gone. */
export function expectedSideRows(delivery: DeliveryWithSideRows['delivery']): SideRows {
  return {
    owed: delivery?.status === 'pending' ? delivery.due : null,
    failed: delivery?.status === 'failed' ? delivery.createdAt : null,
  };
}

/** A delivery whose side rows disagree with it (`status` null: the delivery is gone), as `deliveries check` prints it. */
export interface SideRowsDrift extends SideRows {
  deliveryId: string;
  webhookId: string;
  status: DeliveryStatus | null;
  expected: SideRows;
  /** Present when a side row is filed under another organization or webhook than the delivery's. */
  otherOwner?: true;
}

/** The disagreement of a delivery's side rows with it, or null when they say what it says (times compared to the microsecond, under its organization and webhook). */
export function sideRowsDrift(row: DeliveryWithSideRows): SideRowsDrift | null {
  const expected = expectedSideRows(row.delivery);
  if (row.owed === expected.owed && row.failed === expected.failed && !row.otherOwner) return null;
  return {
    deliveryId: row.deliveryId, webhookId: row.webhookId, status: row.delivery?.status ?? null,
    owed: row.owed, failed: row.failed, expected, ...(row.otherOwner ? { otherOwner: true as const } : {}),
  };
}

/** Deliveries read (and repaired) per statement: each is its own transaction, so no lock is held longer than one page's statement. */
export const DELIVERIES_PAGE = 2_000;
/** How long a repair keeps trying a delivery whose row another statement holds, and how often. */
const LOCKED_WAIT_MS = 30_000;
const LOCKED_RETRY_MS = 100;

/** Whether a webhook of that id exists (whatever its organization: the CLI's `--webhook`). */
export async function webhookExists(em: Em, webhookId: string): Promise<boolean> {
  return (await em.count(Webhook, { id: webhookId })) > 0;
}

/** Repairs these deliveries' side rows, trying again those another statement has locked meanwhile; answers how many stayed locked. */
async function repairWaiting(em: Em, deliveryIds: string[]): Promise<number> {
  let left = deliveryIds;
  for (const started = Date.now(); ;) {
    const settled = new Set(await repairSideRows(em, left));
    left = left.filter((id) => !settled.has(id));
    if (!left.length || Date.now() - started >= LOCKED_WAIT_MS) return left.length;
    await new Promise((resolve) => setTimeout(resolve, LOCKED_RETRY_MS));
  }
}

/**
 * Checks (or repairs, `repair`) the side rows of every delivery (or of `webhookId`'s): the
 * deliveries in (created_at, id) order, DELIVERIES_PAGE (or `pageSize`) a statement, then the owed
 * and failed rows whose delivery is gone, in delivery id order. Each drifted delivery goes to
 * `onDrift` as it is found (awaited), then its page's drifted ones are repaired: from the delivery as
 * it is when its row is locked, not as it was read, so an attempt, a retry or a recovery committed in
 * between is kept (repairSideRows). Answers how many deliveries were read, how many drifted and how
 * many a repair left as they were because another statement kept them locked for LOCKED_WAIT_MS.
 */
export async function walkDeliverySideRows(
  em: Em, opts: { repair: boolean; webhookId?: string; pageSize?: number }, onDrift: (drift: SideRowsDrift) => void | Promise<void>,
): Promise<{ deliveries: number; drifted: number; locked: number }> {
  const limit = opts.pageSize ?? DELIVERIES_PAGE;
  let deliveries = 0;
  let drifted = 0;
  let locked = 0;
  const compare = async (rows: DeliveryWithSideRows[]) => {
    const found = rows.map(sideRowsDrift).filter((d): d is SideRowsDrift => d !== null);
    for (const drift of found) await onDrift(drift);
    drifted += found.length;
    if (opts.repair && found.length) locked += await repairWaiting(em, found.map((d) => d.deliveryId));
  };
  for (let after: CreatedCursor | null = null; ;) {
    const page = await readDeliveriesWithSideRows(em, { webhookId: opts.webhookId, after, limit });
    deliveries += page.rows.length;
    await compare(page.rows);
    if (page.rows.length < limit) break;
    after = page.last;
  }
  for (const side of ['owed', 'failed'] as const) {
    for (let after = ''; ;) {
      const page = await readSideRowsWithoutDelivery(em, side, { webhookId: opts.webhookId, after, limit });
      await compare(page.rows);
      if (page.seen < limit) break;
      after = page.last!;
    }
  }
  return { deliveries, drifted, locked };
}

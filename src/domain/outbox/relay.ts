import type { Config } from '../../../config';
import type { Orm } from '../../db/orm';
import type { Producer } from '../../queues/producer';
import { SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC } from '../submissions/fanout-store';
import { claimRelayBatch, postponeRelay, type RelayRow } from './store';

/** What the relay and the sweep of owed work use: the database, the queues, the sweep's interval. */
export interface OutboxDeps {
  orm: Orm;
  producer: Producer;
  config: Readonly<Config>;
}

/** The fan-out job of each outbox topic. */
const FANOUT_OF_TOPIC = {
  [SUBMISSION_CREATED_TOPIC]: 'fanout',
  [SUBMISSION_DELETED_TOPIC]: 'fanout-deletion',
} as const;

/**
 * Hands outbox rows that never reached the queue (Redis was down or forgot, or the process died
 * between commit and enqueue) to the fan-out. Rows stay unprocessed until the fan-out marks them;
 * each relay of a row pushes its next relay time back (doubling), so rows whose fan-out keeps
 * failing never hold back newer ones. A row's first relay adds its job in bulk (a job id derived
 * from the submission makes a double add harmless); later ones re-queue it one by one, which also
 * replaces a fan-out that used up its attempts. `skip locked` lets several relays run at once.
 */
export async function relayOutbox(deps: OutboxDeps): Promise<number> {
  return deps.orm.em.fork().transactional(async (tx) => {
    const rows = await claimRelayBatch(tx);
    if (rows.length === 0) return 0;
    const jobOf = (row: RelayRow) => ({
      name: FANOUT_OF_TOPIC[row.topic], data: { submissionId: row.submission_id, outboxId: row.id },
    });
    await deps.producer.addBulk('submissions', rows.filter((row) => row.relay_attempts === 0).map(jobOf));
    for (const row of rows.filter((r) => r.relay_attempts > 0)) {
      const { name, data } = jobOf(row);
      await deps.producer.requeue('submissions', name, data);
    }
    await postponeRelay(tx, rows.map((row) => row.id));
    return rows.length;
  });
}

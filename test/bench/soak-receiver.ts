import { startReceiver } from '../support/fakes/receiver';

/**
 * The soak's webhook receiver, in a process of its own (spawned by soak.ts with an IPC channel):
 * answers 503 to every 20th attempt it gets (SOAK_FAIL_EVERY), 200 to the rest, keeps no bodies,
 * and reports each arrival to its parent every 100 ms as [submission id, arrival (ms since the
 * epoch), whether it answered 2xx]. Sends `{ url }` once listening; exits when its parent goes.
 */
const FAIL_EVERY = Number(process.env.SOAK_FAIL_EVERY ?? 20);

export type Arrival = [submissionId: string, receivedAt: number, ok: boolean];
export type ReceiverMessage = { url: string } | { arrivals: Arrival[] };

async function main(): Promise<void> {
  let batch: Arrival[] = [];
  const receiver = await startReceiver({
    keep: false,
    respond: (attempt) => ({ status: attempt % FAIL_EVERY === 0 ? 503 : 200 }),
    onDelivery: (delivery, status) => {
      const id = (JSON.parse(delivery.rawBody) as { data?: { submission?: { id?: string } } }).data?.submission?.id;
      if (id) batch.push([id, delivery.receivedAt, status < 300]);
    },
  });
  const send = (message: ReceiverMessage) => process.send!(message);
  const flush = setInterval(() => {
    if (!batch.length) return;
    send({ arrivals: batch });
    batch = [];
  }, 100);
  process.once('disconnect', () => {
    clearInterval(flush);
    void receiver.close().finally(() => process.exit(0));
  });
  send({ url: receiver.url });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

import { flatHeaders, readRawBody, startLoopbackServer } from './http-server';

export interface Delivery {
  headers: Record<string, string>;
  /** The body exactly as received, for signature checks. */
  rawBody: string;
  receivedAt: number;
}

/** The most arrivals within any window of `windowMs` (sliding, starting at an arrival). */
export function mostInWindow(deliveries: Delivery[], windowMs = 1000): number {
  const times = deliveries.map((d) => d.receivedAt).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

export interface ReceiverReply {
  status: number;
  headers?: Record<string, string>;
  /** Wait this long before answering (to provoke sender timeouts). */
  delayMs?: number;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** Resolves once at least `count` deliveries have arrived; rejects after timeoutMs (default 5000). */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

interface Waiter {
  count: number;
  resolve(): void;
}

/** A webhook endpoint that records every request in arrival order and answers as scripted. */
export async function startReceiver(opts?: {
  /** `attempt` is 1 for the first request this receiver gets, 2 for the second, and so on. */
  respond?: (attempt: number, req: Delivery) => ReceiverReply;
  /** Called with each delivery and the status it is answered with. */
  onDelivery?: (req: Delivery, status: number) => void;
  /** false: `deliveries` stays empty (a long run's receiver would otherwise keep every body); `waitFor` still counts. */
  keep?: boolean;
}): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  let received = 0;
  const waiters = new Set<Waiter>();
  const pendingReplies = new Set<NodeJS.Timeout>();
  const respond = opts?.respond ?? ((): ReceiverReply => ({ status: 200 }));

  function settleWaiters(): void {
    for (const waiter of waiters) {
      if (received >= waiter.count) {
        waiters.delete(waiter);
        waiter.resolve();
      }
    }
  }

  const server = await startLoopbackServer(async (req, res) => {
    const delivery = { headers: flatHeaders(req), rawBody: await readRawBody(req), receivedAt: Date.now() };
    received++;
    if (opts?.keep !== false) deliveries.push(delivery);
    settleWaiters();

    const reply = respond(received, delivery);
    opts?.onDelivery?.(delivery, reply.status);
    const answer = (): void => {
      res.writeHead(reply.status, { 'Content-Type': 'text/plain', ...reply.headers });
      res.end('');
    };
    if (!reply.delayMs) return answer();
    const timer = setTimeout(() => {
      pendingReplies.delete(timer);
      if (!res.destroyed) answer();
    }, reply.delayMs);
    pendingReplies.add(timer);
  });

  return {
    url: `${server.origin}/webhook`,
    deliveries,
    waitFor(count, timeoutMs = 5000) {
      if (received >= count) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          count,
          resolve() {
            clearTimeout(timer);
            resolve();
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`receiver got ${received} of ${count} deliveries within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    close() {
      for (const timer of pendingReplies) clearTimeout(timer);
      pendingReplies.clear();
      return server.close();
    },
  };
}

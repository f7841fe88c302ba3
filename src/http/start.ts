import type { AppContext } from '../app';
import { startQueueSampler } from '../ops/queue-sampler';
import { createHttpServer } from './server';

const DRAIN_GRACE_MS = 1_000;
const IDLE_SWEEP_MS = 100;

export interface RunningHttp {
  port: number;
  /** Readiness goes 503, the listener closes, and in-flight requests finish with their answers. */
  drain(): Promise<void>;
}

/** The HTTP API, and the queue gauges its /metrics exports, sampled in the background. */
export async function startHttp(app: AppContext, port = app.config.port, host = app.config.host): Promise<RunningHttp> {
  const { server, lifecycle } = createHttpServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const stopSampler = startQueueSampler(app);
  const address = server.address() as { port: number };
  app.logger.info({ port: address.port, publicUrl: app.config.publicUrl }, 'listening');
  return {
    port: address.port,
    async drain() {
      lifecycle.draining = true;
      stopSampler();
      // Give load balancers a moment to see readiness fail before the listener closes.
      await new Promise((r) => setTimeout(r, DRAIN_GRACE_MS));
      // close() waits for every connection; a keep-alive one becomes idle only once its
      // in-flight request is answered, so idle connections are swept until none is left.
      const sweep = setInterval(() => server.server.closeIdleConnections(), IDLE_SWEEP_MS);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      clearInterval(sweep);
    },
  };
}

import type { AppContext } from '../app';
import { createHttpServer } from './server';

const DRAIN_GRACE_MS = 1_000;

export interface RunningHttp {
  port: number;
  /** Readiness goes 503, the listener closes, and in-flight requests finish. */
  drain(): Promise<void>;
}

export async function startHttp(app: AppContext, port = app.config.port, host = app.config.host): Promise<RunningHttp> {
  const { server, lifecycle } = createHttpServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as { port: number };
  app.logger.info({ port: address.port, publicUrl: app.config.publicUrl }, 'listening');
  return {
    port: address.port,
    async drain() {
      lifecycle.draining = true;
      // Give load balancers a moment to see readiness fail before the listener closes.
      await new Promise((r) => setTimeout(r, DRAIN_GRACE_MS));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.server.closeIdleConnections?.();
      });
    },
  };
}

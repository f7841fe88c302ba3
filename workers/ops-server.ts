import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AppContext } from '../src/app';
import { pingDatabase } from '../src/db/orm';
import { registry } from '../src/lib/metrics';
import { isBearerAuthorized } from '../src/ops/admin-auth';

const DEPENDENCY_TIMEOUT_MS = 2_000;

export interface OpsServer {
  port: number;
  /** /readyz answers 503 from now on. */
  markDraining(): void;
  close(): Promise<void>;
}

async function dependenciesAnswer(app: AppContext): Promise<boolean> {
  const timeout = new Promise<false>((resolve) => setTimeout(() => resolve(false), DEPENDENCY_TIMEOUT_MS).unref());
  const checks = Promise.all([pingDatabase(app.orm), app.redis.ping()]).then(() => true, () => false);
  return Promise.race([checks, timeout]);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** `/healthz`, `/readyz` and `/metrics` of a worker process, on METRICS_PORT. */
export async function startOpsServer(app: AppContext, port: number, host: string): Promise<OpsServer> {
  let draining = false;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') return sendJson(res, 405, { error: 'method_not_allowed' });
    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      void (async () => {
        const ready = !draining && (await dependenciesAnswer(app));
        sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : draining ? 'draining' : 'unavailable' });
      })();
      return;
    }
    if (path === '/metrics') {
      const token = app.config.metricsToken;
      if (token && !isBearerAuthorized(req.headers.authorization, token)) {
        res.setHeader('WWW-Authenticate', 'Bearer');
        return sendJson(res, 401, { error: 'unauthorized', message: 'A valid metrics token is required' });
      }
      registry.metrics().then((body) => {
        res.writeHead(200, { 'Content-Type': registry.contentType });
        res.end(body);
      }, () => sendJson(res, 500, { error: 'internal_error' }));
      return;
    }
    sendJson(res, 404, { error: 'not_found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    markDraining() {
      draining = true;
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

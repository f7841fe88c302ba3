import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Server } from 'restify';
import type { AppContext } from '../../app';
import { pingDatabase } from '../../db/orm';
import { registry } from '../../lib/metrics';
import { isBearerAuthorized } from '../../ops/admin-auth';

const OPENAPI_PATH = path.resolve(__dirname, '../../../../openapi.yaml');

export interface Lifecycle {
  draining: boolean;
}

async function dependenciesAnswer(app: AppContext, opts: { redis: boolean }): Promise<boolean> {
  const timeout = new Promise<false>((resolve) => setTimeout(() => resolve(false), 2000).unref());
  const checks = Promise.all([
    pingDatabase(app.orm),
    ...(opts.redis ? [app.redis.ping()] : []),
  ]).then(() => true, () => false);
  return Promise.race([checks, timeout]);
}

export function registerOpsRoutes(server: Server, app: AppContext, lifecycle: Lifecycle): void {
  const openapi = readFileSync(OPENAPI_PATH, 'utf8');

  server.get('/healthz', async (_req, res) => {
    res.send(200, { status: 'ok' });
  });

  const readiness = (opts: { redis: boolean }) => async (_req: unknown, res: any) => {
    const ready = !lifecycle.draining && (await dependenciesAnswer(app, opts));
    res.send(ready ? 200 : 503, { status: ready ? 'ready' : lifecycle.draining ? 'draining' : 'unavailable' });
  };
  // Every dependency, for dashboards and operators.
  server.get('/readyz', readiness({ redis: true }));
  // For a load balancer in front of the API: submissions are accepted without Redis (the outbox
  // keeps their jobs), so only PostgreSQL decides whether this process can take traffic.
  server.get('/readyz/api', readiness({ redis: false }));

  server.get('/openapi.yaml', async (_req, res) => {
    res.setHeader('Content-Type', 'application/yaml');
    res.writeHead(200);
    res.end(openapi);
  });

  server.get('/metrics', async (req, res) => {
    const token = app.config.metricsToken;
    if (token && !isBearerAuthorized(req.header('authorization') || undefined, token)) {
      res.header('WWW-Authenticate', 'Bearer');
      res.send(401, { error: 'unauthorized', message: 'A valid metrics token is required' });
      return;
    }
    const body = await registry.metrics();
    res.setHeader('Content-Type', registry.contentType);
    res.writeHead(200);
    res.end(body);
  });
}

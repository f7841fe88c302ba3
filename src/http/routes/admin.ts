import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { isAdminAuthorized } from '../../ops/admin-auth';
import { createQueueDashboard, DASHBOARD_PATH, isDashboardUrl } from '../../ops/queue-dashboard';
import { readQueueHealth } from '../../ops/queue-health';
import { QUEUE_NAMES } from '../../queues/catalogue';
import { QueueUnavailableError } from '../../queues/producer';
import { errors } from '../errors';
import { sendApiError, sendReply } from '../pipeline';
import { requestState } from '../request-state';

/**
 * restify cannot host Bull Board's express adapter, so dashboard requests are handed to an
 * express app before restify routes or reads them; the chain stops once express has answered.
 */
function dashboardHandOff(app: AppContext, adminToken: string) {
  const dashboard = createQueueDashboard(QUEUE_NAMES.map((name) => app.producer.queue(name)), adminToken);
  return (req: Request, res: Response, next: (arg?: false) => void) => {
    if (!isDashboardUrl(req.url)) return next();
    requestState(req).routeLabel = DASHBOARD_PATH;
    res.once('close', () => next(false));
    dashboard(req as any, res as any);
  };
}

/** Operator endpoints; without ADMIN_TOKEN they do not exist and answer like any unknown path. */
export function registerAdminRoutes(server: Server, app: AppContext): void {
  const adminToken = app.config.adminToken;
  if (adminToken) server.pre(dashboardHandOff(app, adminToken));

  server.get('/admin/queues/health', async (req: Request, res: Response) => {
    try {
      if (!adminToken) throw errors.notFound('No such path');
      if (!isAdminAuthorized(req.header('authorization'), adminToken)) throw errors.unauthorized('Invalid admin token');
      const health = await app.producer.bounded(() => readQueueHealth(app)).catch((err) => {
        if (err instanceof QueueUnavailableError) throw errors.serviceUnavailable('Redis is unavailable; retry later');
        throw err;
      });
      sendReply(res, { status: 200, body: health });
    } catch (err) {
      sendApiError(app, req, res, err);
    }
  });
}

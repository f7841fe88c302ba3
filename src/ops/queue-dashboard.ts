import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { isAdminAuthorized } from './admin-auth';

export const DASHBOARD_PATH = '/admin/queues/ui';

export function isDashboardUrl(url: string | undefined): boolean {
  return !!url && (url === DASHBOARD_PATH || /^\/admin\/queues\/ui[/?]/.test(url));
}

function requireAdmin(adminToken: string) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (isAdminAuthorized(req.headers.authorization, adminToken)) return next();
    // Basic lets a browser prompt for the token (as the password); Bearer works for scripts.
    res.set('WWW-Authenticate', 'Basic realm="form-service operators", charset="UTF-8"');
    res.status(401).json({ error: 'unauthorized', message: 'Invalid admin token' });
  };
}

/** Bull Board on a small express app that serves everything under DASHBOARD_PATH, behind the admin token. */
export function createQueueDashboard(queues: Queue[], adminToken: string): Express {
  const adapter = new ExpressAdapter().setBasePath(DASHBOARD_PATH);
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue)), serverAdapter: adapter });
  const dashboard = express();
  dashboard.disable('x-powered-by');
  dashboard.use(DASHBOARD_PATH, requireAdmin(adminToken), adapter.getRouter());
  return dashboard;
}

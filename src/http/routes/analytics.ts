import type { Server } from 'restify';
import type { AppContext } from '../../app';
import { formAnalytics } from '../../domain/forms/analytics';
import { findForm } from '../../domain/forms/form-service';
import { errors } from '../errors';
import { authenticated } from '../pipeline';
import { formIdParam } from './schemas';

export function registerAnalyticsRoutes(server: Server, app: AppContext): void {
  server.get('/v1/forms/:formId/analytics', authenticated(app, 'forms:read', async ({ em, readEm, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw errors.notFound('Form not found');
    return { status: 200, body: await formAnalytics(readEm, organizationId, formId) };
  }));
}

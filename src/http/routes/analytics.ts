import type { Server } from 'restify';
import type { AppContext } from '../../app';
import Joi from 'joi';
import { ANALYTICS_DAYS_DEFAULT, ANALYTICS_DAYS_MAX, formAnalytics } from '../../domain/forms/analytics';
import { findForm } from '../../domain/forms/form-service';
import { errors } from '../errors';
import { authenticated } from '../pipeline';
import { validate } from '../validation';
import { formIdParam } from './schemas';

const querySchema = Joi.object({
  days: Joi.number().integer().min(1).max(ANALYTICS_DAYS_MAX).default(ANALYTICS_DAYS_DEFAULT),
}).unknown(true);

export function registerAnalyticsRoutes(server: Server, app: AppContext): void {
  server.get('/v1/forms/:formId/analytics', authenticated(app, 'forms:read', async ({ em, readLagging, organizationId, req }) => {
    const formId = formIdParam(req);
    if (!formId || !(await findForm(em, organizationId, formId))) throw errors.notFound('Form not found');
    const { days } = validate<{ days: number }>(querySchema, req.query ?? {});
    return { status: 200, body: await readLagging((readEm) => formAnalytics(readEm, organizationId, formId, { days })) };
  }));
}

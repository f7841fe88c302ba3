import { ApiKey, Organization } from '../domain/auth/entities';
import { CrmSync } from '../domain/crm/entities';
import { Form, FormAnalyticsDay, FormField, FormPage } from '../domain/forms/entities';
import {
  IdempotencyRecord, OutboxEvent, PaymentClaim, Submission, UsageCounter, UsageRollup,
} from '../domain/submissions/entities';
import { DeliveryAttempt, Webhook, WebhookDelivery } from '../domain/webhooks/entities';

export const ENTITIES = [
  Organization, ApiKey, Form, FormPage, FormField, FormAnalyticsDay, Submission, UsageCounter,
  UsageRollup, PaymentClaim, IdempotencyRecord, OutboxEvent, Webhook, WebhookDelivery,
  DeliveryAttempt, CrmSync,
];

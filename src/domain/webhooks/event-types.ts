// The event names alone, importable by stores without the payload builders (and their imports).

/** What a webhook subscribes to, as stored and returned. */
export const SUBMISSION_CREATED = 'submission.created';
/** The event type on the wire (body `type` and `X-Service-Event`). */
export const FORM_SUBMISSION_CREATED = 'form.submission.created';
export const SUBMISSION_DELETED = 'submission.deleted';
export const FORM_SUBMISSION_DELETED = 'form.submission.deleted';

/**
 * Operational events (README "Webhooks"): about the webhooks themselves, not about submissions. Subscribed
 * and sent under these names; organization-wide webhooks only; never sent to the webhook they are about.
 */
export const ENDPOINT_DISABLED = 'endpoint.disabled';
export const MESSAGE_ATTEMPT_FAILING = 'message.attempt.failing';
export const MESSAGE_ATTEMPT_EXHAUSTED = 'message.attempt.exhausted';
export const MESSAGE_ATTEMPT_RECOVERED = 'message.attempt.recovered';
export const OPERATIONAL_EVENTS = [ENDPOINT_DISABLED, MESSAGE_ATTEMPT_FAILING, MESSAGE_ATTEMPT_EXHAUSTED, MESSAGE_ATTEMPT_RECOVERED] as const;
export type OperationalEvent = typeof OPERATIONAL_EVENTS[number];

export function isOperationalEvent(event: string): event is OperationalEvent {
  return (OPERATIONAL_EVENTS as readonly string[]).includes(event);
}

/**
 * SQL condition: webhook `w` (a table alias) is enabled and listens, for the form `form` of the
 * organization `org` (SQL expressions), to an event in `events` (a jsonb array expression).
 */
export function webhookListensSql(w: string, org: string, form: string, events: string): string {
  return `${w}.organization_id = ${org} and ${w}.enabled and (${w}.form_id is null or ${w}.form_id = ${form}) and ${w}.events @> ${events}`;
}

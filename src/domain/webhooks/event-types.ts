// The event names alone, importable by stores without the payload builders (and their imports).

/** What a webhook subscribes to, as stored and returned. */
export const SUBMISSION_CREATED = 'submission.created';
/** The event type on the wire (body `type` and `X-Service-Event`). */
export const FORM_SUBMISSION_CREATED = 'form.submission.created';
export const SUBMISSION_DELETED = 'submission.deleted';
export const FORM_SUBMISSION_DELETED = 'form.submission.deleted';

import type { Request } from 'restify';

/** What the HTTP layer keeps on a request for its log line and metrics. */
export interface RequestState {
  /** Set first thing, for every request. */
  requestId?: string;
  startedAt?: bigint;
  /** Known once the request is authenticated, or once a public request names a published form. */
  organizationId?: string;
  /** The route's name in metrics and logs when restify has no route for it (the admin dashboard). */
  routeLabel?: string;
}

export function requestState(req: Request): RequestState {
  return req as unknown as RequestState;
}

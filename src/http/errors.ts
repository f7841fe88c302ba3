export interface ErrorDetail {
  field: string;
  message: string;
}

/** The one error taxonomy: every failure a client can see is an ApiError with a stable code. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string | number> = {},
    readonly extras: Record<string, unknown> = {},
  ) {
    super(message);
  }

  toJSON(): Record<string, unknown> {
    return {
      error: this.code,
      message: this.message,
      ...(this.details ? { details: this.details } : {}),
      ...this.extras,
    };
  }
}

export const errors = {
  invalidJson: (message = 'Request body is not valid JSON') => new ApiError(400, 'invalid_json', message),
  validation: (details: ErrorDetail[], message = 'Request validation failed') =>
    new ApiError(400, 'validation_error', message, details),
  unauthorized: (message = 'A valid API key is required') => new ApiError(401, 'unauthorized', message),
  forbidden: (scope: string) =>
    new ApiError(403, 'forbidden', `This API key lacks the scope required for this request: ${scope}`),
  notFound: (message = 'Not found') => new ApiError(404, 'not_found', message),
  methodNotAllowed: (method: string) =>
    new ApiError(405, 'method_not_allowed', `Method ${method} is not allowed on this path`),
  payloadTooLarge: () => new ApiError(413, 'payload_too_large', 'Request body exceeds 1 MB'),
  unsupportedEncoding: () => new ApiError(415, 'unsupported_media_type', 'Compressed request bodies are not accepted; send the body uncompressed'),
  rateLimited: (retryAfter: number) =>
    new ApiError(429, 'rate_limit_exceeded', 'Rate limit exceeded; retry after the window resets',
      undefined, { 'Retry-After': retryAfter }, { retryAfter }),
  serviceUnavailable: (message: string, retryAfter = 5) =>
    new ApiError(503, 'service_unavailable', message, undefined, { 'Retry-After': retryAfter }, { retryAfter }),
  internal: () => new ApiError(500, 'internal_error', 'An unexpected error occurred'),
};

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08006', // PostgreSQL: shutting down, cannot connect
  '53300', // PostgreSQL: too many connections
]);
/** PostgreSQL ended the statement: statement timeout (or a cancel request), lock wait timeout, idle-in-transaction timeout. */
const CANCELLED_CODES = new Set(['57014', '55P03', '25P03']);
/**
 * A hot standby cancels a query that holds rows or a lock its replay of the primary's changes needs
 * ("canceling statement due to conflict with recovery": 40001, or 40P01 for a deadlock with the
 * replay); on the primary they are a serialization failure and a deadlock. Either way the same
 * statement may well succeed when run again.
 */
const CONFLICT_CODES = new Set(['40001', '40P01']);

/** How a dependency failed rather than the code; the label of `formservice_replica_read_failures_total`. */
export type DependencyFailure = 'unavailable' | 'cancelled' | 'conflict';

/** Why a dependency (PostgreSQL, a pool) failed rather than the code: worth a retry, not a 500. Null: it did not. */
export function dependencyFailure(err: unknown): DependencyFailure | null {
  const e = err as any;
  if (!e) return null;
  if (CONFLICT_CODES.has(e.code)) return 'conflict';
  if (CANCELLED_CODES.has(e.code)) return 'cancelled';
  if (e.name === 'KnexTimeoutError' || e.name === 'ConnectionException' || UNAVAILABLE_CODES.has(e.code)) return 'unavailable';
  return /Connection terminated|connect ECONNREFUSED|Timeout acquiring a connection|Query read timeout|^timeout expired$/i
    .test(String(e.message ?? '')) ? 'unavailable' : null;
}

/** A dependency (PostgreSQL, a pool) failed rather than the code: worth a retry, not a 500. */
export function isDependencyUnavailable(err: unknown): boolean {
  return dependencyFailure(err) !== null;
}

/** What a client is told when a dependency failed it: 503 with Retry-After. */
export function dependencyUnavailable(): ApiError {
  return errors.serviceUnavailable('A backing service is unavailable; retry later');
}

/** What a client is told about an error that is not an ApiError: 503 for an unavailable dependency, else 500. */
export function unexpectedError(err: unknown): ApiError {
  return isDependencyUnavailable(err) ? dependencyUnavailable() : errors.internal();
}

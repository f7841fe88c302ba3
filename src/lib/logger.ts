import pino, { type Logger } from 'pino';

const SECRET_FIELDS = ['apiKey', 'key', 'secret', 'signingSecret', 'accessToken', 'token', 'captchaToken', 'password', 'authorization'];
const VALUE_FIELDS = ['body', 'data', 'values', 'rawData'];

const SECRET_HEADERS = ['authorization', '["x-api-key"]', 'cookie'];

/** Paths that may carry credentials or submitted values, at the top level or one level down; they never reach a log line. */
export const REDACT_PATHS = [
  ...SECRET_HEADERS.flatMap((header) => [`headers.${header}`, `*.headers.${header}`]),
  ...[...SECRET_FIELDS, ...VALUE_FIELDS].flatMap((field) => [field, `*.${field}`]),
];

/**
 * pino's `isoTime` (`,"time":"<ISO 8601>"`) from a prefix made once a second: a line then costs a
 * clock read and a concatenation instead of Date#toISOString, which was a quarter of the access
 * line's CPU. The same text for every instant Date#toISOString writes in four-digit years; others
 * (never a clock's) are converted as before.
 */
let cachedSecond = Number.NaN;
let cachedPrefix = '';
const FOUR_DIGIT_YEARS_END_MS = 253_402_300_800_000; // 10000-01-01T00:00:00Z
export function isoTimestamp(now = Date.now()): string {
  if (now < 0 || now >= FOUR_DIGIT_YEARS_END_MS) return `,"time":"${new Date(now).toISOString()}"`;
  const second = Math.floor(now / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = `,"time":"${new Date(second * 1000).toISOString().slice(0, 20)}`; // …T17:24:10.
  }
  const ms = now - second * 1000;
  return `${cachedPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

/**
 * Writes to stdout asynchronously and in blocks: lines wait until 4 KiB have gathered or 100 ms
 * have passed, so a busy API pays one write (and one completion callback) per dozen request lines
 * rather than per line. pino writes out what is left when the process exits; `flushLogger` before
 * exiting on purpose.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({
    level,
    base: { service: 'form-service' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: () => isoTimestamp(),
  }, destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 100 }));
}

export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}

/** What jobLogger reads from a BullMQ job; its data is deliberately not part of it. */
export interface LoggedJob {
  id?: string;
  name: string;
  queueName: string;
  attemptsMade: number;
}

/** A child logger whose lines name the job and the attempt being run (1 for the first). */
export function jobLogger(logger: Logger, job: LoggedJob): Logger {
  return logger.child({ queue: job.queueName, job: job.name, jobId: job.id, attempt: job.attemptsMade + 1 });
}

export type { Logger };

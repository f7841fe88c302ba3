import pino, { type Logger } from 'pino';

/** Paths that may carry credentials or submitted values; they never reach a log line. */
export const REDACT_PATHS = [
  'req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie',
  'headers.authorization', 'headers["x-api-key"]',
  '*.apiKey', '*.key', '*.secret', '*.accessToken', '*.token', '*.captchaToken', '*.password',
  'body', '*.body', 'data', '*.data', 'values', '*.values', 'rawData', '*.rawData',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({
    level,
    base: { service: 'form-service' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  }, destination);
}

export type { Logger };

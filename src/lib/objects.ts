/** A JSON object: not null, not an array. Also used by the browser bundle, so it imports nothing. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

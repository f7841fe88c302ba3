export const SCOPES = [
  '*',
  'forms:*', 'forms:read', 'forms:write',
  'submissions:*', 'submissions:read', 'submissions:write',
  'webhooks:*', 'webhooks:read', 'webhooks:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** `*` grants everything; `ns:*` grants every scope of its namespace. */
export function hasScope(granted: readonly string[], required: Scope): boolean {
  const namespace = required.split(':')[0];
  return granted.some((s) => s === '*' || s === required || s === `${namespace}:*`);
}

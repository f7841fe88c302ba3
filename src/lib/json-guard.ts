// What a parsed request body may contain before any other code sees it. PostgreSQL refuses NUL in
// text and jsonb and unpaired surrogates in jsonb, and recursive helpers (stringify, deep copies)
// overflow the stack on very deep values: such bodies are refused up front, for every surface.

export const MAX_JSON_DEPTH = 64;

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why a string cannot be stored, or null when it can. */
export function unstorableStringProblem(text: string): string | null {
  if (text.includes('\u0000')) return 'contains a NUL character';
  if (UNPAIRED_SURROGATE.test(text)) return 'contains an unpaired surrogate';
  return null;
}

/**
 * Why a parsed JSON value is refused (a bad string anywhere, keys included, or nesting deeper than
 * MAX_JSON_DEPTH), or null when it is fine. Iterative, so no input can exhaust the stack.
 */
export function jsonBodyProblem(value: unknown, maxDepth = MAX_JSON_DEPTH): string | null {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length) {
    const { value: current, depth } = stack.pop()!;
    if (typeof current === 'string') {
      const problem = unstorableStringProblem(current);
      if (problem) return `A string in the body ${problem}`;
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (depth >= maxDepth) return `The body is nested deeper than ${maxDepth} levels`;
    if (Array.isArray(current)) {
      for (const item of current) stack.push({ value: item, depth: depth + 1 });
      continue;
    }
    for (const [key, item] of Object.entries(current)) {
      const problem = unstorableStringProblem(key);
      if (problem) return `A property name in the body ${problem}`;
      stack.push({ value: item, depth: depth + 1 });
    }
  }
  return null;
}

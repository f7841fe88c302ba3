// validationRules.pattern: a form author's regular expression, run on submitted text. Run with an
// RE2 engine, whose matching time is linear in the text, so no pattern can stall the event loop.
// Browser-safe (bundled into the hosted page) so both sides accept exactly the same texts.
import { RE2JS } from 're2js';

/** Longer texts are refused before matching: bounds the cost of one match. */
export const PATTERN_INPUT_MAX_LENGTH = 10_000;
/** RE2's own estimate of a compiled pattern's cost; bigger programs are refused at form save. */
export const PATTERN_MAX_PROGRAM_SIZE = 5_000;

export type CompiledPattern = { ok: true; pattern: RE2JS } | { ok: false; message: string };

const compiled = new Map<string, CompiledPattern>();
const MAX_CACHED = 1_000;

function compileUncached(source: string): CompiledPattern {
  let pattern: RE2JS;
  try {
    pattern = RE2JS.compile(source);
  } catch (err) {
    // RE2 has no backreferences or lookaround: those patterns cannot be guaranteed linear time.
    const reason = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : 'invalid';
    return { ok: false, message: `pattern must be a regular expression without backreferences or lookaround (${reason})` };
  }
  if (pattern.programSize() > PATTERN_MAX_PROGRAM_SIZE) return { ok: false, message: 'pattern is too complex' };
  return { ok: true, pattern };
}

/** The compiled pattern, or why it cannot be used; compiled once per source per process. */
export function compilePattern(source: string): CompiledPattern {
  let result = compiled.get(source);
  if (!result) {
    result = compileUncached(source);
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
    compiled.set(source, result);
  }
  return result;
}

/**
 * Whether `text` contains a match. A pattern that cannot compile (one stored before patterns were
 * checked this way) must not block submitters: it is ignored.
 */
export function matchesPattern(source: string, text: string): boolean {
  const result = compilePattern(source);
  return result.ok ? result.pattern.test(text) : true;
}

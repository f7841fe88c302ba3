// Conditional logic: which pages and fields are visible for a set of submitted values.
// Browser-safe (bundled into the hosted page): no Node imports, no dependencies.
import type { ConditionalLogic, ConditionRule, FormStructure } from './types';
import { isPlainObject } from '../../lib/objects';

type Values = Record<string, unknown>;

/** The value submitted for `key`; never one inherited from Object.prototype (a field may be called `constructor`). */
export function ownValue(values: Values, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(values, key) ? values[key] : undefined;
}

/** undefined, null, blank strings, empty arrays and objects without a non-empty value are empty; false and 0 are not. */
export function isEmptyValue(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === 'string') return value.trim() === '';
  if (typeof value === 'number') return Number.isNaN(value);
  if (Array.isArray(value)) return value.length === 0;
  if (isPlainObject(value)) {
    // A name value carries a `format` discriminator that is not itself an answer.
    return Object.entries(value).every(([key, part]) => key === 'format' || isEmptyValue(part));
  }
  return false;
}

function asNumber(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

const ISO_DATE_PREFIX = /^\d{4}-\d{2}-\d{2}/;

function asTimestamp(value: unknown): number | null {
  if (typeof value !== 'string' || !ISO_DATE_PREFIX.test(value)) return null;
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : t;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => looseEquals(item, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => looseEquals(a[k], b[k]));
  }
  return false;
}

/**
 * Equality as a form author means it: numbers compare numerically ("5" equals 5), empty equals empty,
 * an array value equals a scalar it includes (a checkbox group "equals" one of its ticked options)
 * and equals an array with the same items in the same order.
 */
function looseEquals(actual: unknown, expected: unknown): boolean {
  if (isEmptyValue(actual) || isEmptyValue(expected)) return isEmptyValue(actual) && isEmptyValue(expected);
  if (Array.isArray(actual) && !Array.isArray(expected) && !isPlainObject(expected)) {
    return actual.some((item) => looseEquals(item, expected));
  }
  if (typeof actual === 'object' || typeof expected === 'object') return deepEqual(actual, expected);
  const a = asNumber(actual);
  const b = asNumber(expected);
  if (a !== null && b !== null) return a === b;
  return String(actual) === String(expected);
}

function contains(actual: unknown, needle: unknown): boolean {
  if (Array.isArray(actual)) return actual.some((item) => looseEquals(item, needle));
  if (typeof actual === 'string' || typeof actual === 'number') {
    return typeof needle === 'string' || typeof needle === 'number' ? String(actual).includes(String(needle)) : false;
  }
  return false;
}

/** Orders two values numerically, or as dates when both are ISO dates; null when they are not comparable. */
function compare(actual: unknown, expected: unknown): number | null {
  const a = asNumber(actual);
  const b = asNumber(expected);
  if (a !== null && b !== null) return a - b;
  const ta = asTimestamp(actual);
  const tb = asTimestamp(expected);
  if (ta !== null && tb !== null) return ta - tb;
  return null;
}

function compareWith(test: (difference: number) => boolean) {
  return (actual: unknown, expected: unknown): boolean => {
    const difference = compare(actual, expected);
    return difference !== null && test(difference);
  };
}

const OPERATOR_TESTS: Record<ConditionRule['operator'], (actual: unknown, expected: unknown) => boolean> = {
  equals: looseEquals,
  notEquals: (a, e) => !looseEquals(a, e),
  contains,
  notContains: (a, e) => !contains(a, e),
  greaterThan: compareWith((d) => d > 0),
  lessThan: compareWith((d) => d < 0),
  greaterThanOrEquals: compareWith((d) => d >= 0),
  lessThanOrEquals: compareWith((d) => d <= 0),
  isEmpty: (a) => isEmptyValue(a),
  isNotEmpty: (a) => !isEmptyValue(a),
};

export function evaluateRule(rule: ConditionRule, values: Values): boolean {
  const test = OPERATOR_TESTS[rule.operator];
  return test ? test(ownValue(values, rule.fieldId), rule.value) : false;
}

/** Whether the element carrying `logic` is visible. With no rules, `all` matches and `any` does not. */
export function evaluateLogic(logic: ConditionalLogic | null | undefined, values: Values): boolean {
  return logicOutcome(logic, (rule) => evaluateRule(rule, values));
}

function logicOutcome(logic: ConditionalLogic | null | undefined, ruleHolds: (rule: ConditionRule) => boolean): boolean {
  if (!logic) return true;
  const matches = logic.logic === 'all' ? logic.rules.every(ruleHolds) : logic.rules.some(ruleHolds);
  return logic.show ? matches : !matches;
}

/**
 * A rule's outcome depends only on whether the field it reads is visible (its value) or hidden
 * (empty): each rule's operator runs at most twice per evaluation, however many rounds it takes.
 */
function memoizedRules(values: Values): (rule: ConditionRule, visible: Set<string>) => boolean {
  const outcomes = new Map<ConditionRule, { shown?: boolean; hidden?: boolean }>();
  return (rule, visible) => {
    let known = outcomes.get(rule);
    if (!known) outcomes.set(rule, (known = {}));
    if (visible.has(rule.fieldId)) return (known.shown ??= evaluateRule(rule, values));
    return (known.hidden ??= evaluateRule(rule, {}));
  };
}

function sameSet(a: Set<string>, b: Set<string>): boolean {
  return a.size === b.size && [...a].every((id) => b.has(id));
}

/**
 * Ids of the fields visible for `values`. A hidden field's value counts as empty for the rules that
 * reference it, so visibility is recomputed until it settles (chains of any length); cyclic rules may
 * never settle, so the iterations are bounded by the number of fields. Callers pass only values
 * that passed their field's type check, so each operator works on bounded, well-formed input.
 */
export function visibleFieldIds(structure: FormStructure, values: Values): Set<string> {
  const pagesById = new Map(structure.pages.map((page) => [page.id, page]));
  const ruleHolds = memoizedRules(values);
  let visible = new Set(structure.fields.map((field) => field.id));
  for (let round = 0; round <= structure.fields.length; round++) {
    const current = visible;
    const holds = (rule: ConditionRule) => ruleHolds(rule, current);
    const next = new Set<string>();
    for (const field of structure.fields) {
      const page = field.pageId === null ? undefined : pagesById.get(field.pageId);
      if (logicOutcome(page?.conditionalLogic, holds) && logicOutcome(field.conditionalLogic, holds)) {
        next.add(field.id);
      }
    }
    if (sameSet(next, visible)) return next;
    visible = next;
  }
  return visible;
}

import { expect } from 'chai';
import { evaluateLogic, evaluateRule, isEmptyValue, visibleFieldIds } from '../../src/domain/forms/logic';
import type { ConditionalLogic, ConditionRule, Field, FormStructure, Page } from '../../src/domain/forms/types';

function field(id: string, extra: Partial<Field> = {}): Field {
  return {
    id, type: 'text', label: id, placeholder: null, description: null, required: false, config: {},
    validationRules: {}, order: 0, pageId: null, conditionalLogic: null, ...extra,
  };
}

function page(id: string, conditionalLogic: ConditionalLogic | null = null): Page {
  return { id, title: id, description: null, order: 0, conditionalLogic };
}

const showWhen = (...rules: ConditionRule[]): ConditionalLogic => ({ show: true, logic: 'all', rules });

describe('isEmptyValue', () => {
  const cases: [string, unknown, boolean][] = [
    ['undefined', undefined, true],
    ['null', null, true],
    ['empty string', '', true],
    ['whitespace string', '  \t', true],
    ['empty array', [], true],
    ['empty object', {}, true],
    ['name object with empty parts', { format: 'split', firstName: '', lastName: ' ' }, true],
    ['NaN', NaN, true],
    ['false', false, false],
    ['zero', 0, false],
    ['text', 'a', false],
    ['array with an item', [''], false],
    ['name object with a part', { format: 'full', fullName: 'Ada' }, false],
    ['file object', { name: 'a.txt', type: 'text/plain', size: 0, dataUrl: 'data:,' }, false],
  ];
  for (const [label, value, expected] of cases) {
    it(`${label} → ${expected}`, () => expect(isEmptyValue(value)).to.equal(expected));
  }
});

describe('evaluateRule', () => {
  const cases: [ConditionRule['operator'], unknown, unknown, boolean][] = [
    ['equals', 'yes', 'yes', true],
    ['equals', 'yes', 'no', false],
    ['equals', 'Yes', 'yes', false], // case-sensitive
    ['equals', 5, '5', true], // numeric on both sides compares numerically
    ['equals', '5.0', 5, true],
    ['equals', 5, 6, false],
    ['equals', true, true, true],
    ['equals', false, 'false', true],
    ['equals', ['a', 'b'], 'a', true], // an array value equals a scalar it includes
    ['equals', ['a', 'b'], 'c', false],
    ['equals', ['a', 'b'], ['a', 'b'], true], // and an array with the same items in order
    ['equals', ['a', 'b'], ['b', 'a'], false],
    ['equals', undefined, '', true], // empty equals empty
    ['equals', undefined, 'x', false],
    ['equals', { format: 'full', fullName: 'Ada' }, { format: 'full', fullName: 'Ada' }, true],
    ['notEquals', 'yes', 'no', true],
    ['notEquals', 'yes', 'yes', false],
    ['notEquals', undefined, 'x', true],
    ['contains', 'hello world', 'lo w', true],
    ['contains', 'hello', 'x', false],
    ['contains', ['a', 'b'], 'b', true],
    ['contains', ['a', 'b'], 'c', false],
    ['contains', undefined, 'a', false],
    ['contains', 12345, 23, true],
    ['notContains', 'hello', 'x', true],
    ['notContains', 'hello', 'ell', false],
    ['notContains', ['a'], 'a', false],
    ['notContains', undefined, 'a', true],
    ['greaterThan', 10, 5, true],
    ['greaterThan', 5, 5, false],
    ['greaterThan', '10', '9', true], // numeric strings compare as numbers, not text
    ['greaterThan', '2024-03-01', '2024-02-29', true], // ISO dates compare as dates
    ['greaterThan', '2024-02-01', '2024-02-29', false],
    ['greaterThan', 'abc', 5, false], // not comparable
    ['greaterThan', undefined, 0, false],
    ['lessThan', 4, 5, true],
    ['lessThan', 5, 5, false],
    ['lessThan', '2024-01-01T10:00:00Z', '2024-01-01T11:00:00Z', true],
    ['greaterThanOrEquals', 5, 5, true],
    ['greaterThanOrEquals', 4, 5, false],
    ['lessThanOrEquals', 5, 5, true],
    ['lessThanOrEquals', 6, 5, false],
    ['isEmpty', '  ', undefined, true],
    ['isEmpty', 'x', undefined, false],
    ['isEmpty', false, undefined, false],
    ['isNotEmpty', [1], undefined, true],
    ['isNotEmpty', [], undefined, false],
  ];
  for (const [operator, actual, expected, result] of cases) {
    it(`${JSON.stringify(actual)} ${operator} ${JSON.stringify(expected)} → ${result}`, () => {
      expect(evaluateRule({ fieldId: 'a', operator, value: expected }, { a: actual })).to.equal(result);
    });
  }

  it('reads only own values, never Object.prototype members', () => {
    expect(evaluateRule({ fieldId: 'constructor', operator: 'isEmpty' }, {})).to.equal(true);
  });
});

describe('evaluateLogic', () => {
  const yes = { fieldId: 'a', operator: 'equals', value: 'yes' } as const;
  const big = { fieldId: 'b', operator: 'greaterThan', value: 10 } as const;
  const values = { a: 'yes', b: 3 };
  const cases: [string, ConditionalLogic | null | undefined, boolean][] = [
    ['no logic', null, true],
    ['undefined logic', undefined, true],
    ['show, all, all match', { show: true, logic: 'all', rules: [yes] }, true],
    ['show, all, one fails', { show: true, logic: 'all', rules: [yes, big] }, false],
    ['show, any, one matches', { show: true, logic: 'any', rules: [yes, big] }, true],
    ['show, any, none match', { show: true, logic: 'any', rules: [big] }, false],
    ['hide, all, all match', { show: false, logic: 'all', rules: [yes] }, false],
    ['hide, all, one fails', { show: false, logic: 'all', rules: [yes, big] }, true],
    ['hide, any, one matches', { show: false, logic: 'any', rules: [yes, big] }, false],
    ['hide, any, none match', { show: false, logic: 'any', rules: [big] }, true],
    // An empty rule list: `all` matches (vacuously), `any` does not.
    ['show, all, no rules', { show: true, logic: 'all', rules: [] }, true],
    ['show, any, no rules', { show: true, logic: 'any', rules: [] }, false],
    ['hide, all, no rules', { show: false, logic: 'all', rules: [] }, false],
    ['hide, any, no rules', { show: false, logic: 'any', rules: [] }, true],
  ];
  for (const [label, logic, visible] of cases) {
    it(`${label} → ${visible ? 'visible' : 'hidden'}`, () => expect(evaluateLogic(logic, values)).to.equal(visible));
  }
});

describe('visibleFieldIds', () => {
  const ids = (structure: FormStructure, values: Record<string, unknown>) =>
    [...visibleFieldIds(structure, values)].sort();

  it('hides every field of a page whose logic hides it', () => {
    const structure: FormStructure = {
      pages: [page('p1'), page('p2', showWhen({ fieldId: 'q', operator: 'equals', value: 'more' }))],
      fields: [field('q', { pageId: 'p1' }), field('x', { pageId: 'p2' }), field('y', { pageId: 'p2' })],
    };
    expect(ids(structure, { q: 'done' })).to.deep.equal(['q']);
    expect(ids(structure, { q: 'more' })).to.deep.equal(['q', 'x', 'y']);
  });

  it('combines page and field logic', () => {
    const structure: FormStructure = {
      pages: [page('p', showWhen({ fieldId: 'a', operator: 'isNotEmpty' }))],
      fields: [field('a'), field('b', { pageId: 'p', conditionalLogic: showWhen({ fieldId: 'a', operator: 'equals', value: 'b' }) })],
    };
    expect(ids(structure, { a: 'c' })).to.deep.equal(['a']);
    expect(ids(structure, { a: 'b' })).to.deep.equal(['a', 'b']);
  });

  it('treats the value of a hidden field as empty along a chain A → B → C', () => {
    const structure: FormStructure = {
      pages: [],
      fields: [
        field('c', { conditionalLogic: showWhen({ fieldId: 'b', operator: 'isNotEmpty' }) }),
        field('b', { conditionalLogic: showWhen({ fieldId: 'a', operator: 'equals', value: 'yes' }) }),
        field('a'),
      ],
    };
    expect(ids(structure, { a: 'no', b: 'stale', c: 'x' })).to.deep.equal(['a']);
    expect(ids(structure, { a: 'yes', b: 'given' })).to.deep.equal(['a', 'b', 'c']);
  });

  it('terminates on cyclic rules', () => {
    const structure: FormStructure = {
      pages: [],
      fields: [
        field('a', { conditionalLogic: showWhen({ fieldId: 'b', operator: 'isEmpty' }) }),
        field('b', { conditionalLogic: showWhen({ fieldId: 'a', operator: 'isEmpty' }) }),
      ],
    };
    expect(() => visibleFieldIds(structure, { a: 'x', b: 'y' })).not.to.throw();
  });
});

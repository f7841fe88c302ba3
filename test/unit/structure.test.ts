import { expect } from 'chai';
import { normalizeStructure } from '../../src/domain/forms/structure';

function idGenerator() {
  let n = 0;
  return (prefix: 'fld' | 'page') => `${prefix}_gen${++n}`;
}

const normalize = (pages: unknown, fields: unknown) => normalizeStructure({ pages, fields }, idGenerator());
const text = (extra: Record<string, unknown> = {}) => ({ type: 'text', label: 'Name', ...extra });
const rule = (fieldId: string, operator = 'isNotEmpty') => ({ show: true, logic: 'all', rules: [{ fieldId, operator }] });

describe('normalizeStructure', () => {
  it('fills defaults and generates missing ids', () => {
    const { structure, errors } = normalize([{ title: 'P' }], [text(), text({ id: 'fld_b', hidden: true, prefillParam: 'utm_source' })]);
    expect(errors).to.deep.equal([]);
    expect(structure).to.deep.equal({
      pages: [{ id: 'page_gen1', title: 'P', description: null, order: 0, conditionalLogic: null }],
      fields: [
        {
          id: 'fld_gen2', type: 'text', label: 'Name', placeholder: null, description: null, required: false,
          config: {}, validationRules: {}, order: 0, pageId: null, conditionalLogic: null,
        },
        {
          id: 'fld_b', type: 'text', label: 'Name', placeholder: null, description: null, required: false,
          config: {}, validationRules: {}, order: 1, pageId: null, conditionalLogic: null, hidden: true, prefillParam: 'utm_source',
        },
      ],
    });
  });

  it('sorts pages and fields by order, keeping input order for ties', () => {
    const { structure } = normalize(
      [{ id: 'b', title: 'B', order: 1 }, { id: 'a', title: 'A', order: 0 }],
      [text({ id: 'x', order: 2 }), text({ id: 'y', order: 1 }), text({ id: 'z', order: 1 })],
    );
    expect(structure!.pages.map((p) => p.id)).to.deep.equal(['a', 'b']);
    expect(structure!.fields.map((f) => f.id)).to.deep.equal(['y', 'z', 'x']);
  });

  it('accepts a complete structure with logic, options and payment', () => {
    const { errors } = normalize(
      [{ id: 'p1', title: 'One' }, { id: 'p2', title: 'Two', conditionalLogic: rule('fld_plan') }],
      [
        { id: 'fld_plan', type: 'select', label: 'Plan', config: { options: [{ label: 'A', value: 'a' }] }, pageId: 'p1' },
        { id: 'fld_pay', type: 'payment', label: 'Pay', config: { amount: 1000, currency: 'eur' }, pageId: 'p2', conditionalLogic: rule('fld_plan', 'equals') },
        { id: 'fld_code', type: 'text', label: 'Code', validationRules: { pattern: '^[0-9]+$', maxLength: 5 } },
      ],
    );
    expect(errors).to.deep.equal([]);
  });

  const rejected: [string, unknown, unknown, string][] = [
    ['pages missing', undefined, [], 'pages'],
    ['fields not an array', [], {}, 'fields'],
    ['unknown field type', [], [text({ type: 'video' })], 'fields[0].type'],
    ['missing label', [], [{ type: 'text' }], 'fields[0].label'],
    ['unknown key on a field', [], [text({ color: 'red' })], 'fields[0].color'],
    ['unknown key on a page', [{ title: 'P', color: 'red' }], [], 'pages[0].color'],
    ['page without title', [{ id: 'p' }], [], 'pages[0].title'],
    ['bad page id', [{ id: 'has space', title: 'P' }], [], 'pages[0].id'],
    ['id too long', [], [text({ id: 'a'.repeat(65) })], 'fields[0].id'],
    ['reserved id', [], [text({ id: '__proto__' })], 'fields[0].id'],
    ['required as a string', [], [text({ required: 'yes' })], 'fields[0].required'],
    ['order as a string', [], [text({ order: '1' })], 'fields[0].order'],
    ['negative order', [], [text({ order: -1 })], 'fields[0].order'],
    ['hidden not boolean', [], [text({ hidden: 'yes' })], 'fields[0].hidden'],
    ['prefillParam not an identifier', [], [text({ prefillParam: 'a b' })], 'fields[0].prefillParam'],
    ['unknown operator', [], [text({ id: 'a' }), text({ conditionalLogic: rule('a', 'like') })], 'fields[1].conditionalLogic.rules[0].operator'],
    ['logic without rules', [], [text({ conditionalLogic: { show: true, logic: 'all' } })], 'fields[0].conditionalLogic.rules'],
    ['logic mode neither all nor any', [], [text({ conditionalLogic: { show: true, logic: 'some', rules: [] } })], 'fields[0].conditionalLogic.logic'],
    ['invalid pattern', [], [text({ validationRules: { pattern: '([' } })], 'fields[0].validationRules.pattern'],
    ['pattern with a backreference (not linear time)', [], [text({ validationRules: { pattern: '^(a)\\1$' } })], 'fields[0].validationRules.pattern'],
    ['pattern with lookahead (not linear time)', [], [text({ validationRules: { pattern: '^(?=.*\\d).+$' } })], 'fields[0].validationRules.pattern'],
    ['pattern whose program is too large', [], [text({ validationRules: { pattern: '[a-z]{1000}[0-9]{1000}'.repeat(3) } })], 'fields[0].validationRules.pattern'],
    ['pattern with lookbehind (not linear time)', [], [text({ validationRules: { pattern: '(?<!x)y' } })], 'fields[0].validationRules.pattern'],
    ['rule value that is an object', [], [text({ id: 'a' }), text({ conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'a', operator: 'equals', value: { deep: 1 } }] } })], 'fields[1].conditionalLogic.rules[0].value'],
    ['rule value longer than 1000 characters', [], [text({ id: 'a' }), text({ conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'a', operator: 'contains', value: 'x'.repeat(1001) }] } })], 'fields[1].conditionalLogic.rules[0].value'],
    ['more than 1000 logic rules in all', [], [text({ id: 'a' }), ...Array.from({ length: 21 }, (_, i) => text({ id: `f${i}`, conditionalLogic: { show: true, logic: 'any', rules: Array.from({ length: 50 }, () => ({ fieldId: 'a', operator: 'isEmpty' })) } }))], 'fields'],
    ['option without value', [], [{ type: 'radio', label: 'R', config: { options: [{ label: 'A' }] } }], 'fields[0].config.options[0].value'],
    ['option value not a string', [], [{ type: 'radio', label: 'R', config: { options: [{ label: 'A', value: 1 }] } }], 'fields[0].config.options[0].value'],
    ['payment amount not an integer', [], [{ type: 'payment', label: 'P', config: { amount: 9.5, currency: 'usd' } }], 'fields[0].config.amount'],
    ['payment currency not 3 letters', [], [{ type: 'payment', label: 'P', config: { amount: 100, currency: 'dollars' } }], 'fields[0].config.currency'],
    // cross-checks after the shapes are valid
    ['duplicate page id', [{ id: 'p', title: 'A' }, { id: 'p', title: 'B' }], [], 'pages[1].id'],
    ['duplicate field id', [], [text({ id: 'a' }), text({ id: 'a' })], 'fields[1].id'],
    ['pageId naming no page', [{ id: 'p', title: 'P' }], [text({ pageId: 'q' })], 'fields[0].pageId'],
    ['field logic naming no field', [], [text({ conditionalLogic: rule('ghost') })], 'fields[0].conditionalLogic.rules[0].fieldId'],
    ['page logic naming no field', [{ title: 'P', conditionalLogic: rule('ghost') }], [], 'pages[0].conditionalLogic.rules[0].fieldId'],
    ['field logic naming itself', [], [text({ id: 'a', conditionalLogic: rule('a') })], 'fields[0].conditionalLogic.rules[0].fieldId'],
    ['select without options', [], [{ type: 'select', label: 'S', config: {} }], 'fields[0].config.options'],
    ['ranking with empty options', [], [{ type: 'ranking', label: 'R', config: { options: [] } }], 'fields[0].config.options'],
    ['duplicate option values', [], [{ type: 'checkbox', label: 'C', config: { options: [{ label: 'A', value: 'x' }, { label: 'B', value: 'x' }] } }], 'fields[0].config.options[1].value'],
    ['payment without amount', [], [{ type: 'payment', label: 'P', config: { currency: 'usd' } }], 'fields[0].config.amount'],
    ['payment without currency', [], [{ type: 'payment', label: 'P', config: { amount: 100 } }], 'fields[0].config.currency'],
    ['second payment field', [], [
      { type: 'payment', label: 'P', config: { amount: 100, currency: 'usd' } },
      { type: 'payment', label: 'Q', config: { amount: 100, currency: 'usd' } },
    ], 'fields[1].type'],
    ['scale with min ≥ max', [], [{ type: 'scale', label: 'S', config: { min: 5, max: 5 } }], 'fields[0].config.max'],
  ];

  for (const [label, pages, fields, path] of rejected) {
    it(`rejects ${label} at ${path}`, () => {
      const { structure, errors } = normalize(pages, fields);
      expect(structure).to.equal(null);
      expect(errors.map((e) => e.field)).to.include(path);
      for (const error of errors) expect(error.message).to.be.a('string').and.not.equal('');
    });
  }

  it('reports every shape error at once', () => {
    const { errors } = normalize([{ id: 'p' }], [text({ type: 'video' }), { label: 'x' }]);
    expect(errors.map((e) => e.field)).to.have.members(['pages[0].title', 'fields[0].type', 'fields[1].type']);
  });

  it('accepts a checkbox without options (a single yes/no box)', () => {
    expect(normalize([], [{ type: 'checkbox', label: 'I agree', required: true }]).errors).to.deep.equal([]);
  });
});

import { expect } from 'chai';
import { validateFieldValue, validateSubmission } from '../../src/domain/submissions/validate';
import type { Field, FieldType, FormStructure } from '../../src/domain/forms/types';

function field(id: string, type: FieldType, extra: Partial<Field> = {}): Field {
  return {
    id, type, label: id, placeholder: null, description: null, required: false, config: {},
    validationRules: {}, order: 0, pageId: null, conditionalLogic: null, ...extra,
  };
}

const options = (...values: string[]) => ({ options: values.map((value) => ({ label: value.toUpperCase(), value })) });
const png = (payloadLength: number) => `data:image/png;base64,${'A'.repeat(payloadLength)}`;
const file = (extra: Record<string, unknown> = {}) =>
  ({ name: 'cv.pdf', type: 'application/pdf', size: 1000, dataUrl: 'data:application/pdf;base64,JVBE', ...extra });

describe('validateFieldValue', () => {
  const cases: [string, Field, unknown[], unknown[]][] = [
    ['text', field('f', 'text'), ['hello', ''], [5, ['a'], { a: 1 }]],
    ['text minLength/maxLength', field('f', 'text', { validationRules: { minLength: 2, maxLength: 4 } }), ['ab', 'abcd'], ['a', 'abcde']],
    ['text config.maxLength', field('f', 'text', { config: { maxLength: 3 } }), ['abc'], ['abcd']],
    // pattern is searched like RegExp.test: authors anchor it themselves
    ['text pattern', field('f', 'text', { validationRules: { pattern: '^[A-Z]{3}$' } }), ['ABC'], ['ABCD', 'abc']],
    ['text pattern runs with RE2 semantics', field('f', 'text', { validationRules: { pattern: '^\\d{3}-[a-z]+$' } }), ['123-abc'], ['12-abc', '123-ABC']],
    ['text longer than the pattern input cap', field('f', 'text', { validationRules: { pattern: 'a' } }), ['a'.repeat(10_000)], ['a'.repeat(10_001)]],
    ['text invalid pattern is ignored', field('f', 'text', { validationRules: { pattern: '([' } }), ['anything'], []],
    ['textarea', field('f', 'textarea', { validationRules: { maxLength: 5 } }), ['a\nb'], ['abcdef', 1]],
    ['email', field('f', 'email'), ['a@b.co', 'first.last+tag@example.org'], ['a@b', 'a b@c.de', '@b.co', 7, `${'a'.repeat(250)}@b.co`]],
    ['email rules', field('f', 'email', { validationRules: { pattern: '@example\\.com$' } }), ['x@example.com'], ['x@example.org']],
    ['url', field('f', 'url'), ['https://example.com/x?y=1', 'http://localhost:3000'], ['ftp://example.com', 'example.com', 'https://', 'javascript:alert(1)', 'https://a b.com']],
    ['url maxLength', field('f', 'url', { validationRules: { maxLength: 20 } }), ['https://a.io'], ['https://example.com/long/path']],
    ['phone', field('f', 'phone'), ['+14155552671', '(415) 555-2671', '+44 20 7946 0958'], ['123456', '+1234567890123456', 'call me', '555-CALL-NOW', 14155552671]],
    ['number', field('f', 'number'), [0, -3.5, 1e6], ['5', NaN, Infinity, true]],
    ['number min/max', field('f', 'number', { validationRules: { min: 1, max: 10 } }), [1, 10], [0, 10.5]],
    ['date', field('f', 'date'), ['2024-02-29', '1999-12-31'], ['2023-02-29', '2024-13-01', '2024-1-5', '2024-01-01T00:00:00Z', 20240101]],
    ['select', field('f', 'select', { config: options('a', 'b') }), ['a', 'b'], ['c', 'A', ['a']]],
    ['radio', field('f', 'radio', { config: options('x') }), ['x'], ['y', 1]],
    ['likert-score', field('f', 'likert-score', { config: options('1', '2', '3') }), ['2'], [2, '4']],
    ['checkbox without options', field('f', 'checkbox'), [true, false], ['yes', ['a'], 1]],
    ['checkbox with options', field('f', 'checkbox', { config: options('a', 'b', 'c') }), [['a'], ['c', 'a'], true], [['d'], ['a', 'a'], 'a']],
    ['required boolean checkbox', field('f', 'checkbox', { required: true }), [true], [false]],
    ['rating (default 1..5)', field('f', 'rating'), [1, 5], [0, 6, 2.5, '3']],
    ['rating config.max', field('f', 'rating', { config: { max: 10 } }), [10], [11]],
    ['scale (default 1..10)', field('f', 'scale'), [1, 10], [0, 11, 1.5]],
    ['scale config.min/max', field('f', 'scale', { config: { min: 0, max: 4 } }), [0, 4], [-1, 5]],
    ['nps', field('f', 'nps'), [0, 10], [-1, 11, 9.9, '9']],
    ['ranking', field('f', 'ranking', { config: options('a', 'b', 'c') }), [['c', 'a', 'b']], [['a', 'b'], ['a', 'b', 'b'], ['a', 'b', 'd'], 'abc']],
    ['name', field('f', 'name'),
      [{ format: 'full', fullName: 'Ada Lovelace' }, { format: 'split', firstName: 'Ada', lastName: 'Lovelace' }],
      ['Ada', { fullName: 'Ada' }, { format: 'full', firstName: 'Ada' }, { format: 'split', firstName: 'Ada' }, { format: 'full', fullName: 'Ada', extra: 1 }]],
    ['name restricted to split', field('f', 'name', { config: { format: 'split' } }),
      [{ format: 'split', firstName: 'Ada', lastName: 'L' }], [{ format: 'full', fullName: 'Ada' }]],
    ['heading', field('f', 'heading'), [], ['x', true, 0]],
    ['signature', field('f', 'signature'), [png(100), png(256 * 1024 - 22)],
      [png(256 * 1024 - 21), 'data:image/jpeg;base64,AAAA', 'data:image/png;base64,not base64!', 'AAAA']],
    ['file-upload', field('f', 'file-upload'), [file(), file({ size: 1024 * 1024 })],
      [file({ size: 1024 * 1024 + 1 }), file({ dataUrl: 'https://x/y.pdf' }), file({ name: '' }), file({ size: '10' }), file({ path: '/etc/passwd' }), 'cv.pdf']],
    ['file-upload accept', field('f', 'file-upload', { config: { accept: ['application/pdf', 'image/*'] } }),
      [file(), file({ type: 'image/png' })], [file({ type: 'text/plain' })]],
    ['file-upload by upload id', field('f', 'file-upload'), [{ uploadId: 'upl_0123456789ABCDEFGHIJ' }, [{ uploadId: 'upl_0123456789ABCDEFGHIJ' }]],
      [{ uploadId: 'upl_short' }, { uploadId: 'upl_0123456789ABCDEFGHIJ', name: 'x' }, [{ uploadId: 'upl_0123456789ABCDEFGHIJ' }, { uploadId: 'upl_0123456789ABCDEFGHIK' }],
        ['upl_0123456789ABCDEFGHIJ'], { uploadId: 42 }]],
    ['file-upload maxFiles 2', field('f', 'file-upload', { config: { maxFiles: 2 } }),
      [[{ uploadId: 'upl_0123456789ABCDEFGHIJ' }, { uploadId: 'upl_0123456789ABCDEFGHIK' }]],
      [[{ uploadId: 'upl_0123456789ABCDEFGHIJ' }, { uploadId: 'upl_0123456789ABCDEFGHIJ' }],
        [{ uploadId: 'upl_0123456789ABCDEFGHIJ' }, { uploadId: 'upl_0123456789ABCDEFGHIK' }, { uploadId: 'upl_0123456789ABCDEFGHIL' }]]],
    ['payment', field('f', 'payment', { config: { amount: 500, currency: 'usd' } }), ['pi_3Nabc_DEF123'], ['pi_', 'ch_123', 'pi_12 3', 123]],
  ];

  for (const [label, target, accepted, rejected] of cases) {
    for (const value of accepted) {
      it(`${label} accepts ${JSON.stringify(value)?.slice(0, 60)}`, () => expect(validateFieldValue(target, value)).to.equal(null));
    }
    for (const value of rejected) {
      it(`${label} rejects ${JSON.stringify(value)?.slice(0, 60)}`, () => expect(validateFieldValue(target, value)).to.be.a('string'));
    }
  }

  it('names the limit without echoing the value', () => {
    const target = field('f', 'text', { validationRules: { maxLength: 3 } });
    expect(validateFieldValue(target, 'secret')).to.equal('Must be at most 3 characters');
    expect(validateFieldValue(field('f', 'email'), 'secret@')).to.not.include('secret');
  });

  it('rejects any value for a heading with its own message', () => {
    expect(validateFieldValue(field('h', 'heading'), 'x')).to.equal('Heading fields take no value');
  });
});

describe('validateSubmission', () => {
  const structure: FormStructure = {
    pages: [
      { id: 'p1', title: 'One', description: null, order: 0, conditionalLogic: null },
      {
        id: 'p2', title: 'Two', description: null, order: 1,
        conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'more', operator: 'equals', value: true }] },
      },
    ],
    fields: [
      field('intro', 'heading', { pageId: 'p1', required: true }),
      field('email', 'email', { pageId: 'p1', required: true }),
      field('more', 'checkbox', { pageId: 'p1' }),
      field('reason', 'select', {
        pageId: 'p1', required: true, config: options('price', 'other'),
        conditionalLogic: { show: false, logic: 'any', rules: [{ fieldId: 'more', operator: 'equals', value: true }] },
      }),
      field('details', 'textarea', {
        pageId: 'p1', required: true,
        conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'reason', operator: 'equals', value: 'other' }] },
      }),
      field('age', 'number', { pageId: 'p2', required: true }),
      field('nickname', 'text', { pageId: 'p2' }),
    ],
  };

  it('keeps visible non-empty values and reports nothing for a complete submission', () => {
    const check = validateSubmission(structure, { email: 'a@b.co', more: true, age: 30, nickname: '' });
    expect(check).to.deep.equal({ values: { email: 'a@b.co', more: true, age: 30 }, missingRequired: [], errors: [] });
  });

  it('lists visible required fields with empty values in form order, never headings', () => {
    const check = validateSubmission(structure, { email: ' ', more: true, nickname: 'x' });
    expect(check.missingRequired.map((f) => f.id)).to.deep.equal(['email', 'age']);
    expect(check.values).to.deep.equal({ more: true, nickname: 'x' });
  });

  it('drops values of fields hidden by their own or their page\'s logic, and never requires them', () => {
    const check = validateSubmission(structure, { email: 'a@b.co', reason: 'other', details: 'because', age: 'not checked' });
    expect(check.values).to.deep.equal({ email: 'a@b.co', reason: 'other', details: 'because' });
    expect(check.errors).to.deep.equal([]);
    expect(check.missingRequired).to.deep.equal([]);
  });

  it('hides a dependent field when the field it depends on is hidden (chain)', () => {
    const check = validateSubmission(structure, { email: 'a@b.co', more: true, reason: 'other', age: 1 });
    expect(check.missingRequired).to.deep.equal([]);
    expect(check.values).to.deep.equal({ email: 'a@b.co', more: true, age: 1 });
  });

  it('reports type errors per field and unknown keys', () => {
    const check = validateSubmission(structure, { email: 'nope', more: true, age: 'x', bogus: 1, intro: 'hi' });
    expect(check.errors).to.deep.equal([
      { field: 'bogus', message: 'Unknown field' },
      { field: 'intro', message: 'Heading fields take no value' },
      { field: 'email', message: 'Must be a valid email address' },
      { field: 'age', message: 'Must be a number' },
    ]);
    expect(check.values).to.deep.equal({ more: true });
  });

  it('requires a required boolean checkbox to be true', () => {
    const consent = { pages: [], fields: [field('ok', 'checkbox', { required: true })] };
    expect(validateSubmission(consent, { ok: false }).errors).to.deep.equal([{ field: 'ok', message: 'Must be checked' }]);
    expect(validateSubmission(consent, {}).missingRequired.map((f) => f.id)).to.deep.equal(['ok']);
  });

  it('counts a name object with empty parts as missing', () => {
    const form = { pages: [], fields: [field('n', 'name', { required: true })] };
    const check = validateSubmission(form, { n: { format: 'split', firstName: '', lastName: '' } });
    expect(check.missingRequired.map((f) => f.id)).to.deep.equal(['n']);
    expect(check.errors).to.deep.equal([]);
  });

  it('ignores inherited property names as values', () => {
    const form = { pages: [], fields: [field('constructor', 'text', { required: true })] };
    expect(validateSubmission(form, {}).missingRequired.map((f) => f.id)).to.deep.equal(['constructor']);
  });

  it('evaluates conditional logic only over values that passed their type check', () => {
    const form = { pages: [], fields: [
      field('more', 'checkbox', { config: options('a', 'b') }),
      field('why', 'text', { required: true, conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'more', operator: 'equals', value: 'a' }] } }),
    ] };
    const check = validateSubmission(form, { more: ['a', 'not-an-option'] });
    expect(check.errors).to.deep.equal([{ field: 'more', message: 'Must be a list of the offered options' }]);
    expect(check.missingRequired).to.deep.equal([]);
  });

  it('answers within a second for many fields depending on one checkbox sent a huge array', () => {
    const rule = { show: true, logic: 'all' as const, rules: [{ fieldId: 'box', operator: 'contains' as const, value: 'zzz' }] };
    const dependents = Array.from({ length: 200 }, (_, i) => field(`d${i}`, 'text', { conditionalLogic: rule }));
    const form = { pages: [], fields: [field('box', 'checkbox', { config: options('a', 'b') }), ...dependents] };
    const started = Date.now();
    const check = validateSubmission(form, { box: Array.from({ length: 200_000 }, (_, i) => `item-${i}`) });
    expect(Date.now() - started).to.be.below(1000);
    expect(check.errors.map((e) => e.field)).to.deep.equal(['box']);
  });
});

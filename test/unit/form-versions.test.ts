import { expect } from 'chai';
import { keptShape, sameStructure } from '../../src/domain/forms/versions';
import type { Field, FieldType } from '../../src/domain/forms/types';
import { exportColumns } from '../../src/domain/submissions/export';
import { refusalOfChangedForm } from '../../src/domain/submissions/create-submission';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import { FORM_CHANGED_NOTICE, formChangedNotice } from '../../src/public/browser/values';

function field(id: string, label: string, type: FieldType = 'text', extra: Partial<Field> = {}): Field {
  return {
    id, type, label, placeholder: null, description: null, required: false, config: {},
    validationRules: {}, order: 0, pageId: null, conditionalLogic: null, ...extra,
  };
}

describe('form versions (pure rules)', () => {
  describe('sameStructure', () => {
    it('is equal for a structure as written and as read back (key order, absent optionals)', () => {
      const written = { pages: [], fields: [{ ...field('a', 'A'), hidden: undefined }] };
      const kept = keptShape(written);
      const readBack = JSON.parse(JSON.stringify({ pages: [], fields: [{ ...kept.fields[0], hidden: false }].map((f) => Object.fromEntries(Object.entries(f).reverse())) }));
      expect(sameStructure(written, readBack)).to.equal(true);
    });
    it('differs on a label, a field more or less, or a changed option', () => {
      const base = { pages: [], fields: [field('a', 'A', 'select', { config: { options: [{ label: 'X', value: 'x' }] } })] };
      const kept = keptShape(base);
      expect(sameStructure({ pages: [], fields: [{ ...base.fields[0], label: 'B' }] }, kept)).to.equal(false);
      expect(sameStructure({ pages: [], fields: [] }, kept)).to.equal(false);
      expect(sameStructure({ pages: [], fields: [...base.fields, field('b', 'B')] }, kept)).to.equal(false);
      expect(sameStructure({ pages: [], fields: [{ ...base.fields[0], config: { options: [{ label: 'Y', value: 'x' }] } }] }, kept)).to.equal(false);
    });
  });

  describe('exportColumns', () => {
    it('takes the current fields in order, then removed ones (most recently removed first), headings never', () => {
      const current = [field('name', 'Full name'), field('h', 'Section', 'heading'), field('dept', 'Department')];
      const kept = [
        { id: 'dept', label: 'Department', type: 'text', version: 3, position: 2 },
        { id: 'email', label: 'Email', type: 'email', version: 2, position: 2 },
        { id: 'old', label: 'Old question', type: 'text', version: 1, position: 1 },
        { id: 'oldh', label: 'Old heading', type: 'heading', version: 2, position: 1 },
        { id: 'fax', label: 'Fax', type: 'text', version: 2, position: 4 },
      ];
      expect(exportColumns(current, kept)).to.deep.equal([
        { id: 'name', label: 'Full name' }, { id: 'dept', label: 'Department' },
        { id: 'email', label: 'Email' }, { id: 'fax', label: 'Fax' }, { id: 'old', label: 'Old question' },
      ]);
    });
  });

  describe('refusalOfChangedForm', () => {
    const form = { version: 3 } as CachedForm;
    const missing = { kind: 'missing_required' as const, fields: [] };
    it('turns a validation refusal of answers to another version into form_changed', () => {
      expect(refusalOfChangedForm(1, form, missing)).to.deep.equal({ kind: 'form_changed', form });
      expect(refusalOfChangedForm(2, form, { kind: 'invalid_fields', errors: [] }).kind).to.equal('form_changed');
    });
    it('leaves it alone for the current version, no version said, or a refusal that is not about the answers', () => {
      expect(refusalOfChangedForm(3, form, missing)).to.equal(missing);
      expect(refusalOfChangedForm(null, form, missing)).to.equal(missing);
      expect(refusalOfChangedForm(undefined, form, missing)).to.equal(missing);
      expect(refusalOfChangedForm(1, form, { kind: 'quota_exceeded' })).to.deep.equal({ kind: 'quota_exceeded' });
    });
  });

  describe('formChangedNotice', () => {
    it('says what was added, removed and reworded, after the intro', () => {
      const before = [field('name', 'Full name'), field('email', 'Email'), field('topic', 'Topic')];
      const after = [field('name', 'Full name'), field('topic', 'Department'), field('phone', 'Phone')];
      expect(formChangedNotice(before, after)).to.equal(
        `${FORM_CHANGED_NOTICE.intro} ${FORM_CHANGED_NOTICE.added} Phone. ${FORM_CHANGED_NOTICE.removed} Email. ${FORM_CHANGED_NOTICE.reworded} Topic → Department.`);
    });
    it('is the intro alone when no question a person sees changed (hidden fields and headings do not count)', () => {
      expect(formChangedNotice([field('a', 'A')], [field('a', 'A'), field('h', 'Hidden', 'text', { hidden: true }), field('x', 'Part 2', 'heading')]))
        .to.equal(FORM_CHANGED_NOTICE.intro);
    });
  });
});

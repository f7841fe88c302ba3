import { expect } from 'chai';
import type { Field } from '../../src/domain/forms/types';
import { DRAFT_TTL_MS, draftKey, draftText, keepable, keptValues, readDraft, UPLOAD_KEPT_MS, uploadClaims } from '../../src/public/browser/draft';
import { UPLOAD_UNCLAIMED_HOURS } from '../../src/domain/files/rules';

const field = (id: string, type: string, extra: Partial<Field> = {}): Field => ({
  id, type, label: id, required: false, config: {}, validationRules: {}, order: 0, pageId: null, ...extra,
} as unknown as Field);

const fields = [
  field('fld_name', 'text'),
  field('fld_tax', 'text', { config: { sensitive: true } }),
  field('fld_pay', 'payment'),
  field('fld_sign', 'signature'),
  field('fld_ref', 'text', { hidden: true }),
  field('fld_title', 'heading'),
  field('fld_files', 'file-upload'),
  field('fld_rating', 'rating'),
];
const NOW = Date.UTC(2026, 10, 26, 12);
const DAY = 24 * 60 * 60 * 1000;

describe("the hosted page's kept answers (draft.ts)", () => {
  it('never keeps sensitive, payment or signature answers, nor hidden fields and headings', () => {
    expect(fields.filter(keepable).map((f) => f.id)).to.deep.equal(['fld_name', 'fld_files', 'fld_rating']);
    const kept = keptValues(fields, {
      fld_name: 'Ada', fld_tax: 'DE123', fld_pay: 'pi_1', fld_sign: 'data:image/png;base64,AAAA', fld_ref: 'x', fld_rating: 4,
      fld_unknown: 'y',
    }, NOW);
    expect(kept).to.deep.equal({ fld_name: 'Ada', fld_rating: 4 });
  });

  it('keeps an upload as its claim (id, name, size), never anything else', () => {
    const claim = { uploadId: 'upl_1', name: 'photo.jpg', size: 2048, uploadedAt: NOW };
    expect(keptValues(fields, { fld_files: [claim] }, NOW)).to.deep.equal({ fld_files: [claim] });
    // Bytes or a bare id are not a claim the page can show.
    expect(keptValues(fields, { fld_files: 'data:image/jpeg;base64,AAAA' }, NOW)).to.deep.equal({});
    expect(keptValues(fields, { fld_files: [{ uploadId: 'upl_1' }] }, NOW)).to.deep.equal({});
    expect(uploadClaims([{ uploadId: 'upl_2', name: 'a.pdf', size: -3, uploadedAt: NOW, bytes: 'AAAA' }]))
      .to.deep.equal([{ uploadId: 'upl_2', name: 'a.pdf', size: 0, uploadedAt: NOW }]);
  });

  it('forgets a kept upload before the service deletes it unclaimed, keeping the other answers', () => {
    const claim = { uploadId: 'upl_1', name: 'photo.jpg', size: 2048, uploadedAt: NOW };
    expect(UPLOAD_KEPT_MS).to.be.below(UPLOAD_UNCLAIMED_HOURS * 60 * 60 * 1000);
    const text = draftText('frm_a', fields, { fld_name: 'Ada', fld_files: [claim] }, 0, NOW)!;
    expect(readDraft(text, 'frm_a', fields, 1, NOW + UPLOAD_KEPT_MS)!.values).to.deep.equal({ fld_name: 'Ada', fld_files: [claim] });
    expect(readDraft(text, 'frm_a', fields, 1, NOW + UPLOAD_KEPT_MS + 1)!.values).to.deep.equal({ fld_name: 'Ada' });
  });

  it('reads back what it stored, with the page reached, for the same form only', () => {
    const text = draftText('frm_a', fields, { fld_name: 'Ada', fld_tax: 'DE123' }, 1, NOW)!;
    expect(text).to.not.include('DE123');
    expect(readDraft(text, 'frm_a', fields, 2, NOW + DAY)).to.deep.equal({ page: 1, values: { fld_name: 'Ada' }, savedAt: NOW });
    expect(readDraft(text, 'frm_b', fields, 2, NOW + DAY), 'another form').to.equal(null);
    expect(draftKey('frm_a')).to.not.equal(draftKey('frm_b'));
  });

  it('forgets answers older than 7 days, and any from the future', () => {
    const text = draftText('frm_a', fields, { fld_name: 'Ada' }, 0, NOW)!;
    expect(readDraft(text, 'frm_a', fields, 1, NOW + DRAFT_TTL_MS)).to.not.equal(null);
    expect(readDraft(text, 'frm_a', fields, 1, NOW + DRAFT_TTL_MS + 1)).to.equal(null);
    expect(readDraft(text, 'frm_a', fields, 1, NOW - DAY)).to.equal(null);
    expect(DRAFT_TTL_MS).to.equal(7 * DAY);
  });

  it('ignores corrupt or foreign stored text safely', () => {
    const bad = [
      null, '', '{', 'null', '[]', '"text"', '{"v":1}',
      JSON.stringify({ v: 2, formId: 'frm_a', savedAt: NOW, page: 0, values: {} }),
      JSON.stringify({ v: 1, formId: 'frm_a', savedAt: 'yesterday', page: 0, values: {} }),
      JSON.stringify({ v: 1, formId: 'frm_a', savedAt: NOW, page: 0, values: [] }),
    ];
    for (const text of bad) expect(readDraft(text, 'frm_a', fields, 2, NOW), String(text)).to.equal(null);
    // A page out of range is page 0; answers of fields the form no longer has or may not keep are dropped.
    const odd = JSON.stringify({ v: 1, formId: 'frm_a', savedAt: NOW, page: 9, values: { fld_name: 'Ada', fld_sign: 'x', __proto__x: 1, fld_gone: 2 } });
    expect(readDraft(odd, 'frm_a', fields, 2, NOW)).to.deep.equal({ page: 0, values: { fld_name: 'Ada' }, savedAt: NOW });
  });

  it('stores nothing when there is nothing worth keeping', () => {
    expect(draftText('frm_a', fields, { fld_tax: 'DE123' }, 0, NOW)).to.equal(null);
  });
});

import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { seal } from '../../src/lib/crypto';
import { activeIntegrations, buildContactUpsert, propertyValue, upsertRequestBody } from '../../src/domain/crm/hubspot';

describe('HubSpot mapping', () => {
  describe('propertyValue', () => {
    const cases: [string, unknown, string | null][] = [
      ['a string', 'Ada', 'Ada'],
      ['a number', 42, '42'],
      ['a boolean', false, 'false'],
      ['multiple choices', ['red', 'blue'], 'red;blue'],
      ['a full name', { format: 'full', fullName: 'Ada Lovelace' }, 'Ada Lovelace'],
      ['a split name', { format: 'split', firstName: 'Ada', lastName: 'Lovelace' }, 'Ada Lovelace'],
      ['a file', { name: 'cv.pdf', type: 'application/pdf', size: 3, dataUrl: 'data:application/pdf;base64,AAA' }, 'cv.pdf'],
      ['nothing', undefined, null],
      ['an empty string', '', null],
      ['a sensitive (sealed) value', { $sealed: seal('"secret"', randomBytes(32)) }, null],
      ['text that only looks sealed (a submitter typed it)', 'enc:v1:AAAA', 'enc:v1:AAAA'],
    ];
    for (const [label, value, expected] of cases) {
      it(`${label} → ${JSON.stringify(expected)}`, () => expect(propertyValue(value)).to.equal(expected));
    }
  });

  describe('buildContactUpsert', () => {
    const fieldMap = { fld_email: 'email', fld_name: 'firstname', fld_missing: 'company' };

    it('maps fields to properties and takes the email from the field mapped to it', () => {
      expect(buildContactUpsert(fieldMap, { fld_email: 'ada@example.com', fld_name: 'Ada' }, 'other@example.com'))
        .to.deep.equal({ email: 'ada@example.com', properties: { email: 'ada@example.com', firstname: 'Ada' } });
    });

    it('falls back to the submitter email', () => {
      expect(buildContactUpsert({ fld_name: 'firstname' }, { fld_name: 'Ada' }, 'ada@example.com'))
        .to.deep.equal({ email: 'ada@example.com', properties: { firstname: 'Ada', email: 'ada@example.com' } });
    });

    it('gives nothing to upsert without any email', () => {
      expect(buildContactUpsert({ fld_name: 'firstname' }, { fld_name: 'Ada' }, null)).to.equal(null);
    });

    it('builds the batch upsert body keyed by email', () => {
      expect(JSON.parse(upsertRequestBody({ email: 'a@b.c', properties: { email: 'a@b.c', firstname: 'A' } }))).to.deep.equal({
        inputs: [{ idProperty: 'email', id: 'a@b.c', properties: { email: 'a@b.c', firstname: 'A' } }],
      });
    });
  });

  it('lists enabled HubSpot integrations with their position and id', () => {
    const settings = {
      integrations: [
        { id: 'int_1', type: 'hubspot', accessToken: 't1', fieldMap: {} },
        { id: 'int_2', type: 'hubspot', accessToken: 't2', fieldMap: {}, enabled: false },
        { id: 'int_3', type: 'other', accessToken: 't3', fieldMap: {} },
        { id: 'int_4', type: 'hubspot', accessToken: 't4', fieldMap: { a: 'b' }, enabled: true },
        { type: 'hubspot', accessToken: 't5', fieldMap: {} },
      ],
    };
    expect(activeIntegrations(settings).map((i) => [i.index, i.integration.id, i.integration.accessToken]))
      .to.deep.equal([[0, 'int_1', 't1'], [3, 'int_4', 't4']]);
    expect(activeIntegrations({})).to.deep.equal([]);
    expect(activeIntegrations(null)).to.deep.equal([]);
  });
});

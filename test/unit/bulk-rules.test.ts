import { expect } from 'chai';
import fc from 'fast-check';
import { itemIdempotencyKey } from '../../src/domain/submissions/batch-submission';
import { decodeCursor, encodeCursor } from '../../src/domain/submissions/changes';
import { csvHeader, csvRecord, neutralizeFormula } from '../../src/domain/submissions/export';
import { FileLinks } from '../../src/domain/files/links';
import type { Field } from '../../src/domain/forms/types';

describe('change feed cursors', () => {
  it('decode what they encode, for any transaction id and position', () => {
    fc.assert(fc.property(
      fc.bigInt({ min: 0n, max: 18_446_744_073_709_551_615n }), fc.bigInt({ min: 0n, max: 9_223_372_036_854_775_807n }),
      (xid, position) => {
        const at = { xid: String(xid), position: String(position) };
        expect(decodeCursor(encodeCursor(at))).to.deep.equal(at);
      },
    ));
  });

  const b64 = (text: string) => Buffer.from(text).toString('base64url');
  it('read a c1 cursor (a position before changes kept their transaction id) as that position among the rows of transaction 0', () => {
    expect(decodeCursor(b64('c1:42'))).to.deep.equal({ xid: '0', position: '42' });
    expect(decodeCursor(b64('c1:9223372036854775807'))).to.deep.equal({ xid: '0', position: '9223372036854775807' });
  });

  const refused: Array<[string, string]> = [
    ['empty', ''],
    ['not base64url', 'abc+/='],
    ['another prefix', b64('c3:1:5')],
    ['a c2 cursor without a transaction id', b64('c2:5')],
    ['a c1 cursor with one', b64('c1:1:5')],
    ['no prefix', b64('5')],
    ['a negative position', b64('c1:-5')],
    ['a leading zero', b64('c1:05')],
    ['a leading zero in the transaction id', b64('c2:07:5')],
    ['past bigint', b64('c1:9223372036854775808')],
    ['a position past bigint', b64('c2:1:9223372036854775808')],
    ['a transaction id past xid8', b64('c2:18446744073709551616:5')],
    ['trailing text', b64('c1:5 ')],
    ['a non-canonical encoding', `${b64('c1:5')}A`],
    ['too long', 'A'.repeat(81)],
  ];
  for (const [label, cursor] of refused) {
    it(`refuses ${label}`, () => expect(decodeCursor(cursor)).to.equal(null));
  }
});

describe('CSV export cells', () => {
  for (const start of ['=', '+', '-', '@', '\t', '\r']) {
    it(`prefixes a cell starting with ${JSON.stringify(start)} with '`, () => {
      expect(neutralizeFormula(`${start}1+1`)).to.equal(`'${start}1+1`);
    });
  }
  it('leaves other cells alone, including ones with those characters later on', () => {
    for (const cell of ['', 'plain', 'a=b', ' =1', "'=1", '1-2']) expect(neutralizeFormula(cell)).to.equal(cell);
  });

  const fields = [
    { id: 'fld_a', label: '=Label', type: 'text' },
    { id: 'fld_b', label: 'Choices', type: 'checkbox' },
    { id: 'fld_c', label: 'Count', type: 'number' },
    { id: 'fld_d', label: 'Secret', type: 'name' },
  ] as Field[];

  it('heads the columns with the metadata and the field labels, guarded too', () => {
    expect(csvHeader(fields)).to.deep.equal(['id', 'createdAt', 'submitterEmail', 'submitterName', 'formVersion', "'=Label", 'Choices', 'Count', 'Secret']);
  });

  it('renders values: absent as empty, objects and arrays as JSON, numbers as text, sealed as Redacted', () => {
    const row = {
      id: 'sub_1', created_at: new Date('2026-11-03T16:41:05Z'), submitter_email: null, submitter_name: '@me',
      data: { fld_b: ['a', 'b'], fld_c: -3, fld_d: { $sealed: 'enc:v1:abc' } },
    };
    expect(csvRecord(row, fields, new FileLinks(Buffer.alloc(32), 'http://files.test', 60))).to.deep.equal(['sub_1', '2026-11-03T16:41:05.000Z', '', "'@me", '', '', '["a","b"]', "'-3", 'Redacted']);
  });
});

describe('batch item idempotency keys', () => {
  it('differ per item and hold a line feed, which no header value can', () => {
    expect(itemIdempotencyKey('k', 0)).to.not.equal(itemIdempotencyKey('k', 1));
    expect(itemIdempotencyKey('k', 0)).to.include('\n');
  });
});

import { expect } from 'chai';
import { isAdminAuthorized, presentedAdminToken } from '../../src/ops/admin-auth';

const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;

describe('admin token', () => {
  const cases: Array<[string, string | undefined, string | null]> = [
    ['no header', undefined, null],
    ['empty header', '', null],
    ['Bearer', 'Bearer tok_123', 'tok_123'],
    ['bearer, any case and spacing', '  bearer   tok_123 ', 'tok_123'],
    ['Basic: the password is the token', basic('operator:tok_123'), 'tok_123'],
    ['Basic with an empty user', basic(':tok:with:colons'), 'tok:with:colons'],
    ['Basic without a colon', basic('tok_123'), null],
    ['another scheme', 'Token tok_123', null],
    ['two values', 'Bearer a b', null],
  ];
  for (const [label, header, expected] of cases) {
    it(`reads ${label}`, () => expect(presentedAdminToken(header)).to.equal(expected));
  }

  it('authorizes only the exact token', () => {
    const token = 'adm_0123456789abcdef';
    expect(isAdminAuthorized(`Bearer ${token}`, token)).to.equal(true);
    expect(isAdminAuthorized(basic(`ops:${token}`), token)).to.equal(true);
    for (const wrong of [`${token}0`, token.slice(1), token.toUpperCase(), '']) {
      expect(isAdminAuthorized(`Bearer ${wrong}`, token), wrong).to.equal(false);
    }
    expect(isAdminAuthorized(undefined, token)).to.equal(false);
  });
});

import { expect } from 'chai';
import { isDateOnly, parseUtcInstant } from '../../src/lib/dates';

describe('parseUtcInstant (query and body date-times)', () => {
  const zone = process.env.TZ;
  // Node reads TZ again when it changes: the parse must not depend on it.
  for (const tz of ['UTC', 'America/New_York', 'Asia/Kolkata']) {
    describe(`with TZ=${tz}`, () => {
      before(() => { process.env.TZ = tz; });
      after(() => { if (zone === undefined) delete process.env.TZ; else process.env.TZ = zone; });

      it('reads a date-time without an offset as UTC', () => {
        expect(parseUtcInstant('2026-11-01T08:00:00')?.toISOString()).to.equal('2026-11-01T08:00:00.000Z');
        expect(parseUtcInstant('2026-11-01T08:00')?.toISOString()).to.equal('2026-11-01T08:00:00.000Z');
        expect(parseUtcInstant('2026-11-01T08:00:00.250')?.toISOString()).to.equal('2026-11-01T08:00:00.250Z');
      });

      it('keeps the offset a date-time gives', () => {
        expect(parseUtcInstant('2026-11-01T08:00:00Z')?.toISOString()).to.equal('2026-11-01T08:00:00.000Z');
        expect(parseUtcInstant('2026-11-01T08:00:00-05:00')?.toISOString()).to.equal('2026-11-01T13:00:00.000Z');
        expect(parseUtcInstant('2026-11-01T08:00:00+0530')?.toISOString()).to.equal('2026-11-01T02:30:00.000Z');
      });

      it('reads a date alone as its UTC midnight', () => {
        expect(parseUtcInstant('2026-11-01')?.toISOString()).to.equal('2026-11-01T00:00:00.000Z');
        expect(isDateOnly('2026-11-01')).to.equal(true);
        expect(isDateOnly('2026-11-01T00:00:00')).to.equal(false);
      });
    });
  }

  it('takes the first and last instants PostgreSQL reads back (years 0001 to 9999)', () => {
    expect(parseUtcInstant('0001-01-01')?.toISOString()).to.equal('0001-01-01T00:00:00.000Z');
    expect(parseUtcInstant('9999-12-31T23:59:59.999')?.toISOString()).to.equal('9999-12-31T23:59:59.999Z');
  });

  for (const bad of ['', 'yesterday', '2026-13-01', '2026-02-30', '2026-11-01T25:00:00', '2026-11-01 08:00:00', '1764000000000', '2026-11-01T08:00:00Zjunk', '0000-01-01', '0000-12-31T23:00:00Z', '0001-01-01T00:00:00+05:00', '9999-12-31T23:00:00-05:00']) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      expect(parseUtcInstant(bad)).to.equal(null);
    });
  }
});

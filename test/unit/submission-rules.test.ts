import { expect } from 'chai';
import { requestFingerprint } from '../../src/domain/submissions/create-submission';
import { paymentIntentProblem } from '../../src/domain/submissions/payments';
import { dateBounds } from '../../src/http/routes/submissions';

describe('submission rules', () => {
  describe('idempotency fingerprint', () => {
    it('ignores key order, but not values, nesting or the form', () => {
      const a = requestFingerprint('form_a', { data: { x: 1, y: [1, 2] }, submitterEmail: 'a@b.co' });
      expect(requestFingerprint('form_a', { submitterEmail: 'a@b.co', data: { y: [1, 2], x: 1 } })).to.equal(a);
      expect(requestFingerprint('form_a', { data: { x: 1, y: [2, 1] }, submitterEmail: 'a@b.co' })).to.not.equal(a);
      expect(requestFingerprint('form_a', { data: { x: '1', y: [1, 2] }, submitterEmail: 'a@b.co' })).to.not.equal(a);
      expect(requestFingerprint('form_b', { data: { x: 1, y: [1, 2] }, submitterEmail: 'a@b.co' })).to.not.equal(a);
    });
  });

  describe('payment intent check', () => {
    const expected = { amount: 1500, currency: 'eur', formId: 'form_a' };
    const intent = { object: 'payment_intent', status: 'succeeded', amount: 1500, currency: 'eur' };
    const table: Array<[string, Record<string, unknown>, string | null]> = [
      ['a succeeded intent of the amount and currency', intent, null],
      ['currency compared without case', { ...intent, currency: 'EUR' }, null],
      ['not succeeded', { ...intent, status: 'processing' }, 'Payment has not succeeded'],
      ['another amount', { ...intent, amount: 1499 }, 'Payment amount or currency does not match this form'],
      ['another currency', { ...intent, currency: 'usd' }, 'Payment amount or currency does not match this form'],
      ['not a payment intent', { ...intent, object: 'charge' }, 'Payment intent not found'],
      ['made by the service for this form', { ...intent, metadata: { form_id: 'form_a', field_id: 'fld_pay' } }, null],
      ['made for another form', { ...intent, metadata: { form_id: 'form_b', field_id: 'fld_pay' } }, 'This payment was made for another form'],
      ['made for another form, and not paid either', { ...intent, status: 'requires_payment_method', metadata: { form_id: 'form_b' } },
        'This payment was made for another form'],
    ];
    for (const [name, candidate, problem] of table) {
      it(name, () => expect(paymentIntentProblem(candidate, expected)).to.equal(problem));
    }
  });

  describe('date bounds of the submission list', () => {
    it('a date alone covers its whole UTC day', () => {
      const { from, until } = dateBounds('2026-11-01', '2026-11-30');
      expect(from!.toISOString()).to.equal('2026-11-01T00:00:00.000Z');
      expect(until!.toISOString()).to.equal('2026-12-01T00:00:00.000Z');
    });

    it('a date-time is exact, the end included', () => {
      const { from, until } = dateBounds('2026-11-01T10:00:00Z', '2026-11-01T12:00:00.000Z');
      expect(from!.toISOString()).to.equal('2026-11-01T10:00:00.000Z');
      expect(until!.toISOString()).to.equal('2026-11-01T12:00:00.001Z');
    });

    it('no bounds when none are given', () => {
      expect(dateBounds()).to.deep.equal({ from: null, until: null });
    });

    it('leaves open an end past year 9999 (no row is stored there, and PostgreSQL refuses its ISO form)', () => {
      expect(dateBounds('0001-01-01', '9999-12-31')).to.deep.equal({ from: new Date('0001-01-01T00:00:00Z'), until: null });
      expect(dateBounds(undefined, '9999-12-31T23:59:59.999Z').until).to.equal(null);
      expect(dateBounds(undefined, '9999-12-31T23:59:59.998Z').until?.toISOString()).to.equal('9999-12-31T23:59:59.999Z');
    });
  });
});

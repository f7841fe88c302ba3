import { expect } from 'chai';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import type { Field } from '../../src/domain/forms/types';
import { payableField, paymentsEnabled } from '../../src/domain/payments/intents';
import { refundIdempotencyKey, stripeForm } from '../../src/domain/payments/stripe';
import { hostedPageCsp, stripeCspSources } from '../../src/http/hosted-page';
import { parseStripeForm } from '../support/fakes/stripe';

const NONCE = 'bm9uY2Vub25jZQ==';

function form(fields: Array<Partial<Field> & { id: string; type: Field['type'] }>): CachedForm {
  return {
    id: 'form_a', organizationId: 'org_a', title: 'T', description: null, status: 'published', settings: {},
    updatedAt: new Date(0), version: 1,
    structure: {
      pages: [],
      fields: fields.map((f, order) => ({
        label: f.id, placeholder: null, description: null, required: false, config: {}, validationRules: {}, order,
        pageId: null, conditionalLogic: null, ...f,
      })) as Field[],
    },
  };
}

describe('payment rules', () => {
  describe('Stripe form encoding', () => {
    it('encodes nested parameters the way Stripe reads them, and the fake reads them back', () => {
      const body = stripeForm({
        amount: 1500, currency: 'eur', automatic_payment_methods: { enabled: true },
        metadata: { form_id: 'form a&b', field_id: 'fld_pay' }, skipped: undefined, none: null,
      }).join('&');
      expect(body).to.equal('amount=1500&currency=eur&automatic_payment_methods%5Benabled%5D=true'
        + '&metadata%5Bform_id%5D=form%20a%26b&metadata%5Bfield_id%5D=fld_pay');
      expect(parseStripeForm(body)).to.deep.equal({
        amount: '1500', currency: 'eur', automatic_payment_methods: { enabled: 'true' },
        metadata: { form_id: 'form a&b', field_id: 'fld_pay' },
      });
    });

    it('derives one refund key per intent', () => {
      expect(refundIdempotencyKey('pi_1')).to.equal(refundIdempotencyKey('pi_1'));
      expect(refundIdempotencyKey('pi_1')).to.not.equal(refundIdempotencyKey('pi_2'));
      expect(refundIdempotencyKey('pi_1').length).to.be.at.most(255);
    });
  });

  describe('payments enabled', () => {
    it('needs both keys', () => {
      expect(paymentsEnabled({ stripeSecretKey: 'sk_test_1', stripePublishableKey: 'pk_test_1' })).to.equal(true);
      expect(paymentsEnabled({ stripeSecretKey: 'sk_test_1', stripePublishableKey: null })).to.equal(false);
      expect(paymentsEnabled({ stripeSecretKey: null, stripePublishableKey: 'pk_test_1' })).to.equal(false);
    });
  });

  describe('payable field', () => {
    const f = form([
      { id: 'fld_pay', type: 'payment', config: { amount: 1500, currency: 'eur' } },
      { id: 'fld_text', type: 'text' },
      { id: 'fld_free', type: 'payment', config: { amount: 0, currency: 'eur' } },
      { id: 'fld_odd', type: 'payment', config: { amount: 12.5, currency: 'EUR' } },
    ]);
    const table: Array<[unknown, string | null]> = [
      ['fld_pay', null],
      ['fld_text', 'fld_text is not a payment field of this form'],
      ['fld_nope', 'fld_nope is not a payment field of this form'],
      ['fld_free', 'fld_free has no valid amount and currency'],
      ['fld_odd', 'fld_odd has no valid amount and currency'],
      [undefined, 'Request body must contain a "fieldId" string'],
      [42, 'Request body must contain a "fieldId" string'],
    ];
    for (const [fieldId, problem] of table) {
      it(`${JSON.stringify(fieldId)} → ${problem ?? 'payable'}`, () => {
        const found = payableField(f, fieldId);
        if (problem) expect(found).to.deep.equal({ problem });
        else expect(found).to.deep.include({ amount: 1500, currency: 'eur' });
      });
    }
  });

  describe('Content-Security-Policy of a page that takes payments', () => {
    const directive = (csp: string, name: string) => csp.split('; ').find((d) => d.startsWith(`${name} `));

    it('allows exactly the origins Stripe documents for Stripe.js', () => {
      const csp = hostedPageCsp(NONCE, 'https://challenges.cloudflare.com/turnstile/v0/api.js', 'https://js.stripe.com/v3/');
      expect(directive(csp, 'script-src')).to.equal(
        `script-src 'self' 'nonce-${NONCE}' https://challenges.cloudflare.com https://js.stripe.com https://*.js.stripe.com`);
      expect(directive(csp, 'frame-src')).to.equal(
        'frame-src https://challenges.cloudflare.com https://js.stripe.com https://*.js.stripe.com https://hooks.stripe.com');
      expect(directive(csp, 'connect-src')).to.equal("connect-src 'self' https://api.stripe.com");
    });

    it('a Stripe.js served from elsewhere gets its own origin, nothing more', () => {
      expect(stripeCspSources('http://127.0.0.1:4242/v3/')).to.deep.equal({
        script: ['http://127.0.0.1:4242'], frame: ['http://127.0.0.1:4242'], connect: ['http://127.0.0.1:4242'],
      });
    });

    it('a page without payments allows no Stripe origin', () => {
      const csp = hostedPageCsp(NONCE, 'https://challenges.cloudflare.com/turnstile/v0/api.js');
      expect(csp).to.not.include('stripe');
      expect(directive(csp, 'connect-src')).to.equal("connect-src 'self'");
    });

    it('a page with a file-upload field may also connect where its files go', () => {
      const csp = hostedPageCsp(NONCE, 'https://challenges.cloudflare.com/turnstile/v0/api.js', null, 'https://forms.s3.eu-west-1.amazonaws.com');
      expect(directive(csp, 'connect-src')).to.equal("connect-src 'self' https://forms.s3.eu-west-1.amazonaws.com");
    });
  });
});

import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { signStandard } from '../../src/domain/webhooks/signing';
import { newWebhookSecret } from '../../src/domain/webhooks/webhook-service';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { sealValue } from '../../src/domain/submissions/sealed-values';
import type { Field } from '../../src/domain/forms/types';
import {
  buildSubmissionDeletedEvent, buildSubmissionEvent, buildTestEvent, deletionEventIdForSubmission, deliveryHeaders,
  eventIdForSubmission, normalizeEvents,
} from '../../src/domain/webhooks/events';
import { verifySignature } from '../../src/domain/webhooks/signing';

const field = (id: string, label: string, extra: Partial<Field> = {}): Field =>
  ({ id, type: 'text', label, required: false, config: {}, validationRules: {}, order: 0, ...extra }) as Field;

describe('webhook events', () => {
  describe('normalizeEvents', () => {
    const cases: [string[], string[]][] = [
      [['submission.created'], ['submission.created']],
      [['form.submission.created'], ['submission.created']],
      [['form.submission.created', 'submission.created'], ['submission.created']],
      [['form.submission.deleted'], ['submission.deleted']],
      [['submission.deleted', 'form.submission.created', 'form.submission.deleted'], ['submission.deleted', 'submission.created']],
    ];
    for (const [input, expected] of cases) {
      it(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => {
        expect(normalizeEvents(input)).to.deep.equal(expected);
      });
    }
  });

  it('derives one event id per submission, the same every time', () => {
    expect(eventIdForSubmission('sub_Ab12Cd')).to.equal('evt_Ab12Cd');
    expect(eventIdForSubmission('sub_Ab12Cd')).to.equal(eventIdForSubmission('sub_Ab12Cd'));
    expect(eventIdForSubmission('sub_Ab12Ce')).to.not.equal(eventIdForSubmission('sub_Ab12Cd'));
  });

  it('derives the deletion event id from the submission, apart from the created event id', () => {
    expect(deletionEventIdForSubmission('sub_Ab12Cd')).to.equal('evt_Ab12Cd_deleted');
    expect(deletionEventIdForSubmission('sub_Ab12Cd')).to.not.equal(eventIdForSubmission('sub_Ab12Cd'));
  });

  it('builds the deletion event from the form and submission ids only', () => {
    const deletedAt = new Date('2026-11-05T08:12:30.000Z');
    expect(buildSubmissionDeletedEvent({ id: 'form_1', title: 'Contact' }, { id: 'sub_9', formId: 'form_1' }, deletedAt)).to.deep.equal({
      id: 'evt_9_deleted', type: 'form.submission.deleted', createdAt: '2026-11-05T08:12:30.000Z',
      data: { form: { id: 'form_1', title: 'Contact' }, submission: { id: 'sub_9', formId: 'form_1' } },
    });
  });

  describe('buildSubmissionEvent', () => {
    const key = randomBytes(32);
    const createdAt = new Date('2026-11-03T16:41:05.000Z');
    const submission = {
      id: 'sub_4Rt7Vb2Nq', formId: 'form_8Hk2Lq9xZ', createdAt, submitterEmail: 'ada@example.com', submitterName: null,
      data: { fld_email: 'ada@example.com', fld_secret: sealValue('Ada', key), fld_gone: 'kept' },
    };
    const fields = [field('fld_email', 'Email'), field('fld_secret', 'Full name')];
    const event = buildSubmissionEvent({ id: 'form_8Hk2Lq9xZ', title: 'Contact us' }, submission, fields);

    it('has exactly the README "Webhooks" shape', () => {
      expect(event).to.deep.equal({
        id: 'evt_4Rt7Vb2Nq',
        type: 'form.submission.created',
        createdAt: '2026-11-03T16:41:05.000Z',
        data: {
          form: { id: 'form_8Hk2Lq9xZ', title: 'Contact us' },
          submission: {
            id: 'sub_4Rt7Vb2Nq', formId: 'form_8Hk2Lq9xZ', createdAt: '2026-11-03T16:41:05.000Z',
            formVersion: null, submitterEmail: 'ada@example.com', submitterName: null,
            data: { Email: 'ada@example.com', 'Full name': 'Redacted', fld_gone: 'kept' },
            rawData: { fld_email: 'ada@example.com', fld_secret: 'Redacted', fld_gone: 'kept' },
          },
        },
      });
    });

    it('is identical when built again, so a re-run stores the same payload', () => {
      expect(JSON.stringify(buildSubmissionEvent({ id: 'form_8Hk2Lq9xZ', title: 'Contact us' }, submission, fields)))
        .to.equal(JSON.stringify(event));
    });
  });

  it('builds a test event naming the webhook', () => {
    const now = new Date('2026-11-03T17:02:44.000Z');
    expect(buildTestEvent('evt_1', 'wh_1', now)).to.deep.equal({
      id: 'evt_1', type: 'webhook.test', createdAt: '2026-11-03T17:02:44.000Z', data: { webhookId: 'wh_1' },
    });
  });

  describe('deliveryHeaders', () => {
    const body = '{"id":"evt_1"}';
    const headers = deliveryHeaders({
      secret: 'whsec_x', body, eventType: 'form.submission.created', deliveryId: 'dlv_1', eventId: 'evt_1', nowSeconds: 1_793_810_465,
    });

    it('carries the fixed headers of README "Webhooks"', () => {
      expect(headers).to.include({
        'Content-Type': 'application/json',
        'User-Agent': 'FormService-Webhooks/1',
        'X-Service-Timestamp': '1793810465',
        'X-Service-Event': 'form.submission.created',
        'X-Service-Delivery': 'dlv_1',
      });
    });

    it('is signed so that a receiver verifying with the secret accepts it, and with another secret rejects it', () => {
      const check = (secret: string) => verifySignature({
        secret, signature: headers['X-Service-Signature'], timestamp: headers['X-Service-Timestamp'], rawBody: body,
        nowSeconds: 1_793_810_465,
      });
      expect(check('whsec_x')).to.equal(true);
      expect(check('whsec_y')).to.equal(false);
    });

    it('has no previous signature without a previous secret', () => {
      expect(headers).to.not.have.property('X-Service-Signature-Previous');
    });

    it('signs the same timestamp and body with the previous secret too, while there is one', () => {
      const rotated = deliveryHeaders({
        secret: 'whsec_new', previousSecret: 'whsec_old', body, eventType: 'form.submission.created', deliveryId: 'dlv_1', eventId: 'evt_1', nowSeconds: 1_793_810_465,
      });
      const check = (secret: string, header: string) => verifySignature({
        secret, signature: rotated[header], timestamp: rotated['X-Service-Timestamp'], rawBody: body, nowSeconds: 1_793_810_465,
      });
      expect(check('whsec_new', 'X-Service-Signature')).to.equal(true);
      expect(check('whsec_old', 'X-Service-Signature-Previous')).to.equal(true);
      expect(check('whsec_old', 'X-Service-Signature')).to.equal(false);
    });
  });

  describe('Standard Webhooks headers', () => {
    const body = '{"id":"evt_2Lx8Nd4Rf","type":"form.submission.created"}';
    const now = Math.floor(Date.now() / 1000);
    const secret = newWebhookSecret();
    const previous = newWebhookSecret();
    const sign = (previousSecret: string | null) => deliveryHeaders({
      secret, previousSecret, body, eventType: 'form.submission.created', deliveryId: 'dlv_1', eventId: 'evt_2Lx8Nd4Rf', nowSeconds: now,
    });

    it('names the event in webhook-id and the X-Service-Timestamp seconds in webhook-timestamp', () => {
      const headers = sign(null);
      expect(headers['webhook-id']).to.equal('evt_2Lx8Nd4Rf');
      expect(headers['webhook-timestamp']).to.equal(headers['X-Service-Timestamp']);
      expect(headers['webhook-signature']).to.match(/^v1,[A-Za-z0-9+/]{43}=$/);
    });

    it('verifies with the standardwebhooks and svix libraries, and not with another secret', () => {
      const headers = sign(null);
      expect(new StandardWebhook(secret).verify(body, headers)).to.deep.equal(JSON.parse(body));
      expect(new SvixWebhook(secret).verify(body, headers)).to.deep.equal(JSON.parse(body));
      expect(() => new StandardWebhook(previous).verify(body, headers)).to.throw();
    });

    it('carries both signatures during a rotation grace, new first, each verifying with its own secret', () => {
      const headers = sign(previous);
      const [first, second] = headers['webhook-signature'].split(' ');
      expect(first).to.equal(signStandard(secret, 'evt_2Lx8Nd4Rf', now, body));
      expect(second).to.equal(signStandard(previous, 'evt_2Lx8Nd4Rf', now, body));
      for (const key of [secret, previous]) {
        expect(new StandardWebhook(key).verify(body, headers)).to.deep.equal(JSON.parse(body));
        expect(new SvixWebhook(key).verify(body, headers)).to.deep.equal(JSON.parse(body));
      }
    });

    it('generates secrets that read as base64 of at least 24 bytes (whsec_ + base62, a multiple of 4 long)', () => {
      for (let i = 0; i < 200; i++) {
        const generated = newWebhookSecret();
        const chars = generated.slice('whsec_'.length);
        expect(generated).to.match(/^whsec_[A-Za-z0-9]+$/);
        expect(chars.length % 4).to.equal(0);
        expect(Buffer.from(chars, 'base64').length).to.be.at.least(24);
        expect(Buffer.from(chars, 'base64').toString('base64')).to.equal(chars);
      }
    });
  });
});

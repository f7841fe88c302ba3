import { expect } from 'chai';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import type { Field, FieldType, Page } from '../../src/domain/forms/types';
import { botProtectionEnabled, buildPublicForm, publicField, publicSettings } from '../../src/domain/public/public-form';

function field(id: string, type: FieldType, extra: Partial<Field> = {}): Field {
  return {
    id, type, label: id, placeholder: null, description: null, required: false, config: {},
    validationRules: {}, order: 0, pageId: null, conditionalLogic: null, ...extra,
  };
}

const page = (id: string, order: number): Page => ({ id, title: `Page ${id}`, description: null, order, conditionalLogic: null });

function cachedForm(extra: Partial<CachedForm> = {}): CachedForm {
  return {
    id: 'form_abc', organizationId: 'org_secret', title: 'Contact', description: 'Say hi', status: 'published',
    settings: {}, updatedAt: new Date('2026-11-01T00:00:00Z'), version: 1,
    structure: { pages: [], fields: [] },
    ...extra,
  };
}

const OPTIONS = { siteKey: '1x00000000000000000000AA', analyticsToken: 'tok.sig' };

describe('buildPublicForm', () => {
  it('keeps what the page renders and nothing of the organization, integrations or webhooks', () => {
    const form = cachedForm({
      settings: {
        redirectUrl: 'https://example.com/thanks', submitButtonText: 'Send', successMessage: 'Got it',
        integrations: [{ type: 'hubspot', accessToken: 'sealed:v1:abcdef', fieldMap: { fld_email: 'email' } }],
        webhooks: [{ url: 'https://hooks.example.com', secret: 'whsec_x' }],
        internalNote: 'do not show', notifyEmail: 'owner@example.com',
      },
    });
    const json = buildPublicForm(form, OPTIONS);
    expect(Object.keys(json).sort()).to.deep.equal(
      ['botProtection', 'description', 'fields', 'id', 'language', 'pages', 'payments', 'settings', 'telemetry', 'theme', 'title', 'version']);
    expect(json).to.include({ id: 'form_abc', title: 'Contact', description: 'Say hi' });
    expect(json.settings).to.deep.equal({ redirectUrl: 'https://example.com/thanks', submitButtonText: 'Send', successMessage: 'Got it' });
    expect(json.telemetry).to.deep.equal({ analyticsToken: 'tok.sig' });
    const text = JSON.stringify(json);
    for (const secret of ['org_secret', 'organizationId', 'integrations', 'accessToken', 'sealed:', 'whsec_', 'hooks.example.com', 'do not show', 'owner@example.com', 'updatedAt', 'status']) {
      expect(text, secret).not.to.include(secret);
    }
  });

  const settingsCases: [string, Record<string, unknown>, ReturnType<typeof publicSettings>][] = [
    ['defaults', {}, { redirectUrl: null, submitButtonText: 'Submit', successMessage: 'Thank you!' }],
    ['blank strings fall back', { redirectUrl: '', submitButtonText: '  ', successMessage: '' },
      { redirectUrl: null, submitButtonText: 'Submit', successMessage: 'Thank you!' }],
    ['non-strings fall back', { redirectUrl: 5, submitButtonText: ['x'], successMessage: { a: 1 } },
      { redirectUrl: null, submitButtonText: 'Submit', successMessage: 'Thank you!' }],
    ['set values', { redirectUrl: 'https://x.io', submitButtonText: 'Go', successMessage: 'Yay' },
      { redirectUrl: 'https://x.io', submitButtonText: 'Go', successMessage: 'Yay' }],
  ];
  for (const [name, settings, expected] of settingsCases) {
    it(`settings: ${name}`, () => expect(publicSettings(settings)).to.deep.equal(expected));
  }

  const protectionCases: [unknown, boolean][] = [
    [undefined, false], [null, false], [{ enabled: false }, false], [{ enabled: 'true' }, false], [true, false], [{ enabled: true }, true],
  ];
  for (const [botProtection, enabled] of protectionCases) {
    it(`botProtection ${JSON.stringify(botProtection)} → ${enabled ? 'challenge' : 'null'}`, () => {
      expect(botProtectionEnabled({ botProtection })).to.equal(enabled);
      const json = buildPublicForm(cachedForm({ settings: { botProtection } }), OPTIONS);
      expect(json.botProtection).to.deep.equal(enabled
        ? { provider: 'turnstile', siteKey: OPTIONS.siteKey, mode: 'invisible', offlineQueueEnabled: false }
        : null);
    });
  }

  it('names the challenge even when no site key is configured (submissions then fail closed)', () => {
    const json = buildPublicForm(cachedForm({ settings: { botProtection: { enabled: true } } }), { ...OPTIONS, siteKey: null });
    expect(json.botProtection).to.include({ provider: 'turnstile', siteKey: '' });
  });

  describe('payments', () => {
    const payField = field('fld_pay', 'payment', { config: { amount: 1500, currency: 'eur' } });
    const withPayment = cachedForm({ structure: { pages: [], fields: [payField] } });
    it('names Stripe and the publishable key when the form has a payment field and payments are enabled', () => {
      expect(buildPublicForm(withPayment, { ...OPTIONS, publishableKey: 'pk_test_abc' }).payments)
        .to.deep.equal({ provider: 'stripe', publishableKey: 'pk_test_abc' });
    });
    it('is null without a payment field, or with payments not enabled', () => {
      expect(buildPublicForm(cachedForm(), { ...OPTIONS, publishableKey: 'pk_test_abc' }).payments).to.equal(null);
      expect(buildPublicForm(withPayment, { ...OPTIONS, publishableKey: null }).payments).to.equal(null);
      expect(buildPublicForm(withPayment, OPTIONS).payments).to.equal(null);
    });
  });

  const themeCases: [unknown, unknown][] = [
    [undefined, null], [null, null], ['dark', null],
    [{ preset: 'dark' }, { preset: 'dark', tokens: {} }],
    [{ tokens: { primaryColor: '#123456' } }, { preset: null, tokens: { primaryColor: '#123456' } }],
  ];
  for (const [theme, expected] of themeCases) {
    it(`theme ${JSON.stringify(theme)}`, () => {
      expect(buildPublicForm(cachedForm({ settings: { theme } }), OPTIONS).theme).to.deep.equal(expected);
    });
  }

  it('groups fields under their pages and keeps the flat list in order', () => {
    const fields = [field('a', 'text', { pageId: 'p1', order: 0 }), field('b', 'email', { pageId: 'p2', order: 0 }), field('c', 'text', { pageId: 'p1', order: 1 })];
    const json = buildPublicForm(cachedForm({ structure: { pages: [page('p1', 0), page('p2', 1)], fields } }), OPTIONS);
    expect(json.fields.map((f) => f.id)).to.deep.equal(['a', 'b', 'c']);
    expect(json.pages.map((p) => [p.id, p.fields.map((f) => f.id)])).to.deep.equal([['p1', ['a', 'c']], ['p2', ['b']]]);
    expect(json.pages[0]).to.include({ title: 'Page p1', order: 0, description: null, conditionalLogic: null });
  });

  it('shows a file-upload field\'s maxSize as the limit uploads get: its own, the default, or UPLOAD_MAX_BYTES if lower', () => {
    const files = cachedForm({ structure: { pages: [], fields: [
      field('fld_small', 'file-upload', { config: { maxSize: 2_000_000 } }),
      field('fld_huge', 'file-upload', { config: { maxSize: 500_000_000, accept: ['image/*'] } }),
      field('fld_default', 'file-upload'),
      field('fld_text', 'text', { config: { maxLength: 10 } }),
    ] } });
    const sizes = buildPublicForm(files, { ...OPTIONS, uploadMaxBytes: 26_214_400 }).fields.map((f) => f.config.maxSize);
    expect(sizes).to.deep.equal([2_000_000, 26_214_400, 10 * 1024 * 1024, undefined]);
    expect(buildPublicForm(files, { ...OPTIONS, uploadMaxBytes: 1_000_000 }).fields.map((f) => f.config.maxSize))
      .to.deep.equal([1_000_000, 1_000_000, 1_000_000, undefined]);
    expect(files.structure.fields[1].config.maxSize, 'the cached form is left alone').to.equal(500_000_000);
  });

  it('answers null for a missing description', () => {
    expect(buildPublicForm(cachedForm({ description: null }), OPTIONS).description).to.equal(null);
  });
});

describe('publicField', () => {
  it('keeps the config and rules the page and the validator read, drops the rest', () => {
    const source = field('f', 'text', {
      config: { maxLength: 10, layout: 'wide', sensitive: true, crmProperty: 'email', apiSecret: 'x' },
      validationRules: { required: true, minLength: 2, pattern: '^a', serverOnly: 'x' },
      hidden: true, prefillParam: 'ref',
    });
    expect(publicField(source)).to.deep.equal({
      id: 'f', type: 'text', label: 'f', placeholder: null, description: null, required: false,
      config: { maxLength: 10, layout: 'wide', sensitive: true }, validationRules: { required: true, minLength: 2, pattern: '^a' },
      order: 0, pageId: null, conditionalLogic: null, hidden: true, prefillParam: 'ref',
    });
  });

  const configCases: [FieldType, Record<string, unknown>][] = [
    ['select', { options: [{ label: 'A', value: 'a' }] }],
    ['scale', { min: 0, max: 5, minLabel: 'low', maxLabel: 'high' }],
    ['name', { format: 'split' }],
    ['name', { format: 'full', sensitive: true }],
    ['file-upload', { accept: ['image/png'] }],
    ['payment', { amount: 500, currency: 'eur' }],
  ];
  for (const [type, config] of configCases) {
    it(`keeps the ${type} config the page needs`, () => expect(publicField(field('f', type, { config })).config).to.deep.equal(config));
  }

  it('leaves the source field untouched and omits an unset prefillParam', () => {
    const source = field('f', 'text', { config: { sensitive: true } });
    const result = publicField(source);
    expect(source.config).to.deep.equal({ sensitive: true });
    expect(result).not.to.have.property('prefillParam');
    expect(result.hidden).to.equal(false);
  });
});

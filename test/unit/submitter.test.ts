import { expect } from 'chai';
import type { Field, FieldType } from '../../src/domain/forms/types';
import Joi from 'joi';
import { submitterErrors, submitterValueAccepted } from '../../src/domain/submissions/create-submission';
import { submitterDetailsToStore } from '../../src/domain/submissions/submitter';
import { submitterDetails } from '../../src/public/browser/values';

function field(id: string, type: FieldType, config: Record<string, unknown> = {}): Field {
  return {
    id, type, label: id, placeholder: null, description: null, required: false, config,
    validationRules: {}, order: 0, pageId: null, conditionalLogic: null,
  };
}

describe('submitter details and sensitive fields', () => {
  const fields = [
    field('patient', 'name', { sensitive: true }),
    field('contact', 'name'),
    field('private_email', 'email', { sensitive: true }),
    field('email', 'email'),
  ];

  describe('the hosted page', () => {
    it('never copies a sensitive name or email field into the submitter details', () => {
      const details = submitterDetails(fields, {
        patient: { format: 'full', fullName: 'Grace Hopper' }, contact: { format: 'full', fullName: 'Ada Lovelace' },
        private_email: 'grace@example.com', email: 'ada@example.com',
      });
      expect(details).to.deep.equal({ submitterName: 'Ada Lovelace', submitterEmail: 'ada@example.com' });
    });

    it('sends no submitter name when the only name field is sensitive', () => {
      expect(submitterDetails(fields, { patient: { format: 'split', firstName: 'Grace', lastName: 'Hopper' } })).to.deep.equal({});
    });
  });

  describe('the server', () => {
    const store = (values: Record<string, unknown>, submitterName: string | null, submitterEmail: string | null = null) =>
      submitterDetailsToStore(fields, values, { submitterName, submitterEmail });
    const split = { patient: { format: 'split', firstName: 'Grace', lastName: 'Hopper' } };

    it('drops a submitterName that repeats a sensitive name, whole or in part, whatever its case and spacing', () => {
      for (const name of ['Grace Hopper', 'grace  HOPPER', 'Hopper', 'Dr. Grace Hopper']) {
        expect(store(split, name).submitterName, name).to.equal(null);
      }
      expect(store({ patient: { format: 'full', fullName: 'Grace Hopper' } }, 'Grace Hopper').submitterName).to.equal(null);
    });

    it('keeps a submitterName unrelated to the sensitive answers', () => {
      expect(store(split, 'Ada Lovelace').submitterName).to.equal('Ada Lovelace');
      expect(store({}, 'Grace Hopper').submitterName, 'sensitive field left empty').to.equal('Grace Hopper');
    });

    it('drops a submitterEmail that repeats a sensitive email answer', () => {
      expect(store({ private_email: 'grace@example.com' }, null, 'Grace@Example.com').submitterEmail).to.equal(null);
      expect(store({ private_email: 'grace@example.com' }, null, 'ada@example.com').submitterEmail).to.equal('ada@example.com');
    });
  });
});

describe('submitterEmail and submitterName checks', () => {
  it('accept absent, null and valid values', () => {
    expect(submitterErrors(undefined, undefined)).to.deep.equal([]);
    expect(submitterErrors(null, null)).to.deep.equal([]);
    expect(submitterErrors('ada@example.com', 'Ada Lovelace')).to.deep.equal([]);
  });

  it('report every problem of both, email first, named by property', () => {
    expect(submitterErrors(`${'x'.repeat(330)}@a.com`, 'x'.repeat(501))).to.deep.equal([
      { field: 'submitterEmail', message: 'submitterEmail must be a valid email' },
      { field: 'submitterEmail', message: 'submitterEmail length must be less than or equal to 320 characters long' },
      { field: 'submitterName', message: 'submitterName length must be less than or equal to 500 characters long' },
    ]);
    expect(submitterErrors('', 3)).to.deep.equal([
      { field: 'submitterEmail', message: 'submitterEmail is not allowed to be empty' },
      { field: 'submitterName', message: 'submitterName must be a string' },
    ]);
    expect(submitterErrors('nope', undefined)).to.deep.equal([{ field: 'submitterEmail', message: 'submitterEmail must be a valid email' }]);
  });
});

describe('the submitter details check (submitterErrors)', () => {
  // Joi's own verdict, the reference the quick acceptance (submitterValueAccepted) must agree with.
  const joiEmail = Joi.string().email({ tlds: false }).max(320).allow(null);
  const joiName = Joi.string().max(500).allow(null);
  const emails: unknown[] = [
    null, '', ' ', 'ada@example.com', 'a@b.c', 'a@b', 'ä@ü.de', 'ada+tag@sub.example.co.uk', ' a@b.com', 'a@b.com ', 'a@-b.com',
    'user@[127.0.0.1]', '"quoted"@example.com', 'a..b@example.com', '.a@example.com', 'a@example..com', 'a@b_c.com',
    `${'x'.repeat(64)}@example.com`, `${'x'.repeat(65)}@example.com`, `a@${'b'.repeat(63)}.com`, `a@${'b'.repeat(64)}.com`,
    `${'x'.repeat(300)}@example.com`, `${'x'.repeat(330)}@a.com`, 'a@b.com\n', 'a@localhost', 'a@1.2.3.4', 'a@b.c-', 'é@é.é',
    5, true, {}, [], ['a@b.com'],
  ];
  const names: unknown[] = [null, '', ' ', 'Ada Lovelace', 'x'.repeat(500), 'x'.repeat(501), '𝒜'.repeat(250), '𝒜'.repeat(251), 3, {}, []];

  it('accepts without joi exactly what joi accepts', () => {
    for (const value of emails) expect(submitterValueAccepted('submitterEmail', value), JSON.stringify(value)).to.equal(!joiEmail.validate(value).error);
    for (const value of names) expect(submitterValueAccepted('submitterName', value), JSON.stringify(value)).to.equal(!joiName.validate(value).error);
  });

  it("still words a refusal as joi does", () => {
    expect(submitterErrors('', undefined)).to.deep.equal([{ field: 'submitterEmail', message: 'submitterEmail is not allowed to be empty' }]);
    expect(submitterErrors('a@b', 7)).to.deep.equal([
      { field: 'submitterEmail', message: 'submitterEmail must be a valid email' },
      { field: 'submitterName', message: 'submitterName must be a string' },
    ]);
    expect(submitterErrors('ada@example.com', 'Ada')).to.deep.equal([]);
    expect(submitterErrors(undefined, null)).to.deep.equal([]);
  });
});

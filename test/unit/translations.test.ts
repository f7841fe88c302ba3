import { expect } from 'chai';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import { isLanguageTag, keptTranslations, translationErrors, translationFor } from '../../src/domain/forms/translations';
import type { FormStructure } from '../../src/domain/forms/types';
import { buildPublicForm } from '../../src/domain/public/public-form';

const structure: FormStructure = {
  pages: [{ id: 'p1', title: 'About you', description: null, order: 0, conditionalLogic: null }],
  fields: [
    { id: 'fld_name', type: 'text', label: 'Name', placeholder: 'Jane', description: 'As on your ID', required: true, config: {}, validationRules: {}, order: 0, pageId: 'p1', conditionalLogic: null },
    { id: 'fld_color', type: 'radio', label: 'Colour', placeholder: null, description: null, required: false,
      config: { options: [{ label: 'Red', value: 'red' }, { label: 'Blue', value: 'blue' }] }, validationRules: {}, order: 1, pageId: 'p1', conditionalLogic: null },
  ],
};

const french = {
  title: 'Contact',
  pages: { p1: { title: 'À propos de vous' } },
  fields: { fld_name: { label: 'Nom', placeholder: '' }, fld_color: { label: 'Couleur', options: { red: 'Rouge' } } },
};

describe('form translations', () => {
  it('accepts translations of known pages, fields and options under BCP 47 tags', () => {
    expect(translationErrors({ fr: french, 'pt-BR': { title: 'Contato' }, 'zh-Hant-TW': {} }, structure)).to.deep.equal([]);
  });

  it('names every unknown page, field, option and malformed tag', () => {
    const errors = translationErrors({
      fr: { pages: { p9: { title: 'x' } }, fields: { fld_nope: { label: 'x' }, fld_color: { options: { green: 'Vert' } } } },
      'not a tag': { title: 'x' },
      en_GB: { title: 'x' },
    }, structure);
    expect(errors.map((error) => error.field)).to.have.members([
      'translations.fr.pages.p9', 'translations.fr.fields.fld_nope', 'translations.fr.fields.fld_color.options.green',
      'translations.not a tag', 'translations.en_GB',
    ]);
  });

  it('refuses the wrong shapes', () => {
    expect(translationErrors([], structure)).to.have.length.above(0);
    expect(translationErrors({ fr: { title: 7 } }, structure)[0].field).to.equal('translations.fr.title');
    expect(translationErrors({ fr: { fields: { fld_name: { label: 'x', hint: 'y' } } } }, structure)[0].field)
      .to.equal('translations.fr.fields.fld_name.hint');
  });

  it('reads no more pages, fields or options than a structure may hold, and names at most 50 problems', () => {
    const pagesOf = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, {}]));
    expect(translationErrors({ fr: { pages: pagesOf(101) } }, structure).map((e) => e.field)).to.deep.equal(['translations.fr.pages']);
    const fieldsOf = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, {}]));
    expect(translationErrors({ fr: { fields: fieldsOf(501) } }, structure).map((e) => e.field)).to.deep.equal(['translations.fr.fields']);
    const options = Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`o${i}`, 'x']));
    expect(translationErrors({ fr: { fields: { fld_color: { options } } } }, structure).map((e) => e.field))
      .to.deep.equal(['translations.fr.fields.fld_color.options']);
    expect(translationErrors({ fr: { pages: pagesOf(100), fields: fieldsOf(500) } }, structure)).to.have.length(50);
  });

  it('tells BCP 47 tags from other text', () => {
    for (const tag of ['fr', 'fr-FR', 'es-419', 'zh-Hant-TW', 'sr-Latn']) expect(isLanguageTag(tag), tag).to.equal(true);
    for (const tag of ['', 'f', 'fr_FR', 'fr-', '12', 'x'.repeat(40), '__proto__']) expect(isLanguageTag(tag), tag).to.equal(false);
  });

  it('finds the translation of a language, exact before regional', () => {
    expect(translationFor({ 'fr-CA': { title: 'CA' }, fr: { title: 'FR' } }, 'fr')?.title).to.equal('FR');
    expect(translationFor({ 'fr-CA': { title: 'CA' } }, 'fr')?.title).to.equal('CA');
    expect(translationFor({ de: {} }, 'fr')).to.equal(null);
    expect(translationFor(null, 'fr')).to.equal(null);
  });

  it('prefers the regional translation the respondent asked for (pt-BR before pt-PT)', () => {
    const both = { 'pt-PT': { title: 'PT' }, 'pt-BR': { title: 'BR' }, pt: { title: 'pt' } };
    expect(translationFor(both, 'pt', 'pt-BR')?.title).to.equal('BR');
    expect(translationFor(both, 'pt', 'PT_br')?.title).to.equal('BR');
    expect(translationFor(both, 'pt', 'pt-AO')?.title).to.equal('pt');
    expect(translationFor({ 'pt-PT': { title: 'PT' }, 'pt-BR': { title: 'BR' } }, 'pt', 'pt-BR')?.title).to.equal('BR');
    expect(translationFor({ 'pt-PT': { title: 'PT' } }, 'pt', 'de-DE')?.title).to.equal('PT');
  });

  it('keeps what still fits a new structure, drops the rest', () => {
    const kept = keptTranslations({ fr: { ...french, fields: { ...french.fields, fld_gone: { label: 'x' } } } },
      { ...structure, fields: [structure.fields[1]] });
    expect(kept.fr.fields).to.deep.equal({ fld_color: { label: 'Couleur', options: { red: 'Rouge' } } });
    expect(kept.fr.pages).to.deep.equal({ p1: { title: 'À propos de vous' } });
  });

  it('answers the public form in the language, falling back per text, values untouched', () => {
    const form: CachedForm = {
      id: 'form_abc', organizationId: 'org_1', title: 'Contact us', description: 'Say hi', status: 'published',
      settings: {}, translations: { fr: french }, updatedAt: new Date(), version: 1, structure,
    };
    const json = buildPublicForm(form, { siteKey: null, analyticsToken: 't', language: 'fr' });
    expect(json).to.include({ language: 'fr', title: 'Contact', description: 'Say hi' });
    expect(json.settings).to.include({ submitButtonText: 'Envoyer', successMessage: 'Merci !' });
    expect(json.pages[0].title).to.equal('À propos de vous');
    const [name, color] = json.fields;
    expect(name).to.include({ label: 'Nom', placeholder: 'Jane', description: 'As on your ID' });
    expect(color.label).to.equal('Couleur');
    expect(color.config.options).to.deep.equal([{ label: 'Rouge', value: 'red' }, { label: 'Blue', value: 'blue' }]);
    const english = buildPublicForm(form, { siteKey: null, analyticsToken: 't' });
    expect(english).to.include({ language: 'en', title: 'Contact us' });
    expect(english.fields[1].config.options[0]).to.deep.equal({ label: 'Red', value: 'red' });
  });

  it("translates the form's own submit button text and success message, falling back to them", () => {
    const form: CachedForm = {
      id: 'form_abc', organizationId: 'org_1', title: 'Contact us', description: null, status: 'published',
      settings: { submitButtonText: 'Send my application', successMessage: 'We got it, thanks.' },
      translations: { fr: { submitButtonText: 'Envoyer ma candidature', successMessage: 'Bien reçu, merci.' }, de: { submitButtonText: 'Absenden' } },
      updatedAt: new Date(), version: 1, structure,
    };
    expect(translationErrors(form.translations, structure)).to.deep.equal([]);
    expect(buildPublicForm(form, { siteKey: null, analyticsToken: 't', language: 'fr' }).settings)
      .to.include({ submitButtonText: 'Envoyer ma candidature', successMessage: 'Bien reçu, merci.' });
    expect(buildPublicForm(form, { siteKey: null, analyticsToken: 't', language: 'de' }).settings)
      .to.include({ submitButtonText: 'Absenden', successMessage: 'We got it, thanks.' });
    expect(buildPublicForm(form, { siteKey: null, analyticsToken: 't' }).settings)
      .to.include({ submitButtonText: 'Send my application', successMessage: 'We got it, thanks.' });
    const noOwn = { ...form, settings: {}, translations: { fr: { submitButtonText: 'Valider' } } };
    expect(buildPublicForm(noOwn, { siteKey: null, analyticsToken: 't', language: 'fr' }).settings)
      .to.include({ submitButtonText: 'Valider', successMessage: 'Merci !' });
    expect(translationErrors({ fr: { submitButtonText: 'x'.repeat(101) } }, structure).map((e) => e.field))
      .to.deep.equal(['translations.fr.submitButtonText']);
  });
});

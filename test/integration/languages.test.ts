// Languages (README.md "Languages"): form translations on create and PUT /structure, the public form
// and the hosted page in the language asked for, and the language a submission records.
import { expect } from 'chai';
import { call, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';
import { schemaProblems } from '../support/openapi-webhooks';

const pages = [{ id: 'page_a', title: 'About you', order: 0 }];
const fields = [
  field('fld_name', 'text', 'Name', { required: true, order: 0, pageId: 'page_a', placeholder: 'Jane Doe' }),
  field('fld_color', 'radio', 'Colour', {
    required: true, order: 1, pageId: 'page_a',
    config: { options: [{ label: 'Red', value: 'red' }, { label: 'Blue', value: 'blue' }] },
  }),
];
const translations = {
  fr: {
    title: 'Formulaire de test',
    pages: { page_a: { title: 'À propos de vous' } },
    fields: { fld_name: { label: 'Nom' }, fld_color: { label: 'Couleur', options: { red: 'Rouge' } } },
  },
  'pt-BR': { title: 'Formulário' },
};

describe('languages', () => {
  let t: TestApp;
  let tenant: TestTenant;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
  });
  after(async () => t.close());

  const api = (method: string, path: string, body?: unknown) => call(t.url, method, path, { key: tenant.key, body });
  const createForm = async (extra: Record<string, unknown> = {}) => {
    const res = await api('POST', '/v1/forms', { title: 'Test form', status: 'published', pages, fields, translations, ...extra });
    expect(res.status, res.text).to.equal(201);
    return res.body.form;
  };

  describe('translations of a form', () => {
    it('are stored on create and shown on the form detail', async () => {
      const form = await createForm();
      expect(form.translations).to.deep.equal(translations);
      const read = await api('GET', `/v1/forms/${form.id}`);
      expect(read.body.form.translations).to.deep.equal(translations);
      expect(schemaProblems('/components/schemas/FormEnvelope', read.body)).to.deep.equal([]);
    });

    const refusals: Array<[string, unknown, string]> = [
      ['an unknown field', { fr: { fields: { fld_nope: { label: 'x' } } } }, 'translations.fr.fields.fld_nope'],
      ['an unknown page', { fr: { pages: { page_z: { title: 'x' } } } }, 'translations.fr.pages.page_z'],
      ['an unknown option value', { fr: { fields: { fld_color: { options: { green: 'Vert' } } } } }, 'translations.fr.fields.fld_color.options.green'],
      ['a language outside BCP 47', { fr_FR: { title: 'x' } }, 'translations.fr_FR'],
      ['a text that is not a string', { fr: { title: 42 } }, 'translations.fr.title'],
    ];
    for (const [name, value, path] of refusals) {
      it(`refuses ${name} with 400 validation_error naming it, on create and on PUT /structure`, async () => {
        const created = await api('POST', '/v1/forms', { title: 'x', pages, fields, translations: value });
        expect(created.status, created.text).to.equal(400);
        expect(created.body).to.include({ error: 'validation_error' });
        expect(created.body.details.map((d: any) => d.field)).to.include(path);
        const form = await createForm();
        const replaced = await api('PUT', `/v1/forms/${form.id}/structure`, { pages, fields, translations: value });
        expect(replaced.status, replaced.text).to.equal(400);
        expect(replaced.body.details.map((d: any) => d.field)).to.include(path);
        expect((await api('GET', `/v1/forms/${form.id}`)).body.form.translations).to.deep.equal(translations);
      });
    }

    it('refuses a body of thousands of unknown ids with a short 400 (bounded work and answer)', async () => {
      const many = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`page_${i}`, {}]));
      const res = await api('POST', '/v1/forms', { title: 'x', pages, fields, translations: { fr: { pages: many } } });
      expect(res.status).to.equal(400);
      expect(res.body).to.include({ error: 'validation_error' });
      expect(res.body.details).to.have.length.within(1, 50);
      expect(res.text.length).to.be.below(10_000);
    });

    it('are replaced by PUT /structure, and kept where they still fit when it names none', async () => {
      const form = await createForm();
      const without = await api('PUT', `/v1/forms/${form.id}/structure`, { pages, fields: [fields[1]] });
      expect(without.status, without.text).to.equal(200);
      expect(without.body.form.translations.fr.fields).to.deep.equal({ fld_color: { label: 'Couleur', options: { red: 'Rouge' } } });
      expect(without.body.form.translations.fr.title).to.equal('Formulaire de test');
      expect(without.body.form.translations['pt-BR']).to.deep.equal({ title: 'Formulário' });
      const replaced = await api('PUT', `/v1/forms/${form.id}/structure`, { pages, fields, translations: { de: { title: 'Testformular' } } });
      expect(replaced.body.form.translations).to.deep.equal({ de: { title: 'Testformular' } });
    });

    it('settings.language takes only a language the page speaks', async () => {
      const bad = await api('POST', '/v1/forms', { title: 'x', settings: { language: 'xx' } });
      expect(bad.status).to.equal(400);
      expect(bad.body.details.map((d: any) => d.field)).to.include('settings.language');
      const good = await api('POST', '/v1/forms', { title: 'x', settings: { language: 'ja' } });
      expect(good.status, good.text).to.equal(201);
    });
  });

  describe('GET /public/forms/{formId} in a language', () => {
    it('answers in French where translated, per text, with French defaults and the values unchanged', async () => {
      const form = await createForm();
      const res = await call(t.url, 'GET', `/public/forms/${form.id}?lang=fr`);
      expect(res.status).to.equal(200);
      expect(schemaProblems('/components/schemas/PublicForm', res.body)).to.deep.equal([]);
      expect(res.body).to.include({ language: 'fr', title: 'Formulaire de test' });
      expect(res.body.settings).to.include({ submitButtonText: 'Envoyer', successMessage: 'Merci !' });
      expect(res.body.pages[0].title).to.equal('À propos de vous');
      const byId = Object.fromEntries(res.body.fields.map((f: any) => [f.id, f]));
      expect(byId.fld_name).to.include({ label: 'Nom', placeholder: 'Jane Doe' });
      expect(byId.fld_color.config.options).to.deep.equal([{ label: 'Rouge', value: 'red' }, { label: 'Blue', value: 'blue' }]);
      expect(res.headers.get('vary')).to.match(/Accept-Language/i);
    });

    it('chooses by ?lang=, then settings.language, then Accept-Language (region → language), then English', async () => {
      const form = await createForm();
      const lang = async (query: string, headers: Record<string, string> = {}, id = form.id) =>
        (await call(t.url, 'GET', `/public/forms/${id}${query}`, { headers })).body;
      expect((await lang('', { 'Accept-Language': 'fr-FR,fr;q=0.9,en;q=0.8' })).title).to.equal('Formulaire de test');
      expect((await lang('', { 'Accept-Language': 'sv, pt-BR;q=0.5' })).title).to.equal('Formulário');
      expect((await lang('?lang=de', { 'Accept-Language': 'fr' }))).to.include({ language: 'de', title: 'Test form' });
      expect((await lang('?lang=de')).settings.submitButtonText).to.equal('Absenden');
      expect((await lang('', {})).language).to.equal('en');
      const pinned = await createForm({ settings: { language: 'ar' } });
      expect((await lang('', { 'Accept-Language': 'fr' }, pinned.id)).language).to.equal('ar');
      expect((await lang('?lang=fr', {}, pinned.id)).language).to.equal('fr');
    });

    it('prefers the regional translation asked for by ?lang= or Accept-Language (pt-BR before pt-PT)', async () => {
      const form = await createForm({ translations: { 'pt-PT': { title: 'Formulário PT' }, 'pt-BR': { title: 'Formulário BR' } } });
      const byQuery = await call(t.url, 'GET', `/public/forms/${form.id}?lang=pt-BR`);
      expect(byQuery.body).to.include({ language: 'pt', title: 'Formulário BR' });
      const byHeader = await call(t.url, 'GET', `/public/forms/${form.id}`, { headers: { 'Accept-Language': 'en;q=0.1, pt-BR;q=0.9' } });
      expect(byHeader.body).to.include({ language: 'pt', title: 'Formulário BR' });
      const portugal = await call(t.url, 'GET', `/public/forms/${form.id}?lang=pt-PT`);
      expect(portugal.body).to.include({ language: 'pt', title: 'Formulário PT' });
      const page = await call(t.url, 'GET', `/f/${form.id}`, { headers: { 'Accept-Language': 'pt-BR' } });
      expect(page.text).to.include('<title>Formulário BR</title>');
    });

    it('refuses a lang that is not a language tag, in the public error shape', async () => {
      const form = await createForm();
      const res = await call(t.url, 'GET', `/public/forms/${form.id}?lang=${encodeURIComponent('<script>')}`);
      expect(res.status).to.equal(400);
      expect(res.body).to.include({ success: false, error: 'invalid_lang' });
    });
  });

  describe('the hosted page', () => {
    it('names its language and direction in <html lang dir>', async () => {
      const form = await createForm();
      const french = await call(t.url, 'GET', `/f/${form.id}`, { headers: { 'Accept-Language': 'fr-FR' } });
      expect(french.text).to.match(/<html lang="fr" dir="ltr"/);
      expect(french.headers.get('content-language')).to.equal('fr');
      expect(french.text).to.include('Ce formulaire a besoin de JavaScript');
      const arabic = await call(t.url, 'GET', `/f/${form.id}?lang=ar`, { headers: { 'Accept-Language': 'fr-FR' } });
      expect(arabic.text).to.match(/<html lang="ar" dir="rtl"/);
      const english = await call(t.url, 'GET', `/f/${form.id}?lang=sv`);
      expect(english.text).to.match(/<html lang="en" dir="ltr"/);
    });

    it('carries translated texts that hold markup as inert JSON (no </script> or <!-- can close #form-data)', async () => {
      const hostile = '</script><script>alert(1)</script><!--';
      const form = await createForm({
        translations: { fr: { title: hostile, fields: { fld_name: { label: `</SCRIPT >${hostile}`, placeholder: '\u2028<img src=x onerror=alert(1)>' } } } },
      });
      const page = await call(t.url, 'GET', `/f/${form.id}?lang=fr`);
      expect(page.status).to.equal(200);
      expect(page.text.toLowerCase()).to.not.match(/<\/script>\s*<script>alert|<img src=x|<!--/);
      expect(page.text).to.include(`<title>&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!--</title>`);
      const data = /<script type="application\/json" id="form-data">([^<]*)<\/script>/.exec(page.text);
      expect(data, 'the #form-data element ends where the page ends it').to.not.equal(null);
      const json = JSON.parse(data![1]);
      expect(json.title).to.equal(hostile);
      expect(json.fields[0]).to.include({ label: `</SCRIPT >${hostile}`, placeholder: '\u2028<img src=x onerror=alert(1)>' });
      expect(page.text).to.match(/<script type="application\/json" id="form-words">[^<]*<\/script>/);
    });

    it('says a form is not available in the language asked for', async () => {
      const missing = await call(t.url, 'GET', '/f/form_doesNotExist1', { headers: { 'Accept-Language': 'de-CH, en;q=0.5' } });
      expect(missing.status).to.equal(404);
      expect(missing.text).to.match(/<html lang="de" dir="ltr"/);
      expect(missing.text).to.include('Dieses Formular ist nicht verfügbar');
      const arabic = await call(t.url, 'GET', '/f/form_doesNotExist1?lang=ar');
      expect(arabic.text).to.match(/<html lang="ar" dir="rtl"/);
      expect(arabic.text).to.include('هذا النموذج غير متاح');
    });
  });

  describe('the language of a submission', () => {
    it('is recorded from the public body, shown on the detail and the list; values stay values', async () => {
      const form = await createForm();
      const res = await call(t.url, 'POST', `/public/forms/${form.id}`, { body: { values: { fld_name: 'Ada', fld_color: 'red' }, language: 'fr' } });
      expect(res.status, res.text).to.equal(200);
      const detail = await api('GET', `/v1/submissions/${res.body.submissionId}`);
      expect(detail.body.submission).to.include({ language: 'fr' });
      expect(detail.body.submission.rawData).to.deep.equal({ fld_name: 'Ada', fld_color: 'red' });
      expect(schemaProblems('/components/schemas/SubmissionDetail', detail.body.submission)).to.deep.equal([]);
      const list = await api('GET', `/v1/forms/${form.id}/submissions`);
      expect(list.body.submissions[0]).to.include({ id: res.body.submissionId, language: 'fr' });
      expect(schemaProblems('/components/schemas/SubmissionSummary', list.body.submissions[0])).to.deep.equal([]);
    });

    it('is null for API submissions and for a public body that names none', async () => {
      const form = await createForm();
      const viaApi = await api('POST', `/v1/forms/${form.id}/submissions`, { data: { fld_name: 'Ada', fld_color: 'blue' } });
      expect(viaApi.status, viaApi.text).to.equal(201);
      expect((await api('GET', `/v1/submissions/${viaApi.body.submission.id}`)).body.submission.language).to.equal(null);
      const bare = await call(t.url, 'POST', `/public/forms/${form.id}`, { body: { values: { fld_name: 'Bo', fld_color: 'blue' } } });
      expect((await api('GET', `/v1/submissions/${bare.body.submissionId}`)).body.submission.language).to.equal(null);
    });

    it('refuses a language the page does not speak with 400, storing nothing', async () => {
      const form = await createForm();
      for (const language of ['xx', 42, 'fr-FR']) {
        const res = await call(t.url, 'POST', `/public/forms/${form.id}`, { body: { values: { fld_name: 'Ada', fld_color: 'red' }, language } });
        expect(res.status, String(language)).to.equal(400);
        expect(res.body.success).to.equal(false);
      }
      expect((await api('GET', `/v1/forms/${form.id}/submissions`)).body.pagination.total).to.equal(0);
    });
  });
});

// The hosted page in the respondent's language (README.md "Languages"): French from the browser's
// Accept-Language, Arabic (right to left) from ?lang=, and the embed passing its language on.
import { expect } from 'chai';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, openPage, PHONE, requireChromium, SCREENSHOTS } from '../support/browser';
import { startLoopbackServer, type LoopbackServer } from '../support/fakes/http-server';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const form = {
  title: 'Customer survey',
  description: 'Two minutes, two pages.',
  pages: [
    { id: 'p_you', title: 'About you', order: 0 },
    { id: 'p_visit', title: 'Your visit', order: 1 },
  ],
  fields: [
    field('fld_name', 'text', 'Full name', { required: true, order: 0, pageId: 'p_you' }),
    field('fld_email', 'email', 'Email', { required: true, order: 1, pageId: 'p_you', placeholder: 'you@example.com' }),
    field('fld_store', 'radio', 'Which store?', {
      required: true, order: 2, pageId: 'p_you',
      config: { options: [{ label: 'Downtown', value: 'downtown' }, { label: 'Airport', value: 'airport' }] },
    }),
    field('fld_city', 'select', 'City', {
      order: 3, pageId: 'p_you', config: { options: [{ label: 'Paris', value: 'paris' }, { label: 'Cairo', value: 'cairo' }] },
    }),
    field('fld_rating', 'rating', 'How was it?', { required: true, order: 0, pageId: 'p_visit', config: { max: 5 } }),
    field('fld_files', 'file-upload', 'Photos', { order: 1, pageId: 'p_visit', config: { maxFiles: 3 } }),
  ],
  translations: {
    fr: {
      title: 'Enquête clients',
      description: 'Deux minutes, deux pages.',
      pages: { p_you: { title: 'Vous' }, p_visit: { title: 'Votre visite' } },
      fields: {
        fld_name: { label: 'Nom complet' },
        fld_email: { label: 'E-mail', placeholder: 'vous@exemple.fr' },
        fld_store: { label: 'Quel magasin ?', options: { downtown: 'Centre-ville', airport: 'Aéroport' } },
        fld_rating: { label: 'Comment était-ce ?' },
      },
    },
    ar: {
      title: 'استبيان العملاء',
      pages: { p_you: { title: 'عنك' } },
      fields: {
        fld_name: { label: 'الاسم الكامل' },
        fld_email: { label: 'البريد الإلكتروني' },
        fld_store: { label: 'أي متجر؟', options: { downtown: 'وسط المدينة', airport: 'المطار' } },
        fld_city: { label: 'المدينة', options: { cairo: 'القاهرة' } },
      },
    },
  },
};

describe('hosted page in the respondent\'s language (browser)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let created: any;

  before(async function () {
    requireChromium(this);
    t = await startTestApp();
    tenant = await createTenant(t.app);
    created = await createPublishedForm(t.url, tenant.key, form.fields, form);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  const htmlLangDir = (page: Page) => page.evaluate(() => [document.documentElement.lang, document.documentElement.dir, getComputedStyle(document.body).direction]);
  const errorOf = (page: Page, fieldId: string) => page.locator(`#fs-${fieldId}-error`);

  it('speaks French to a browser asking for fr-FR: <html lang>, buttons, progress, required messages, and stores values', async () => {
    const { context, page, problems } = await openPage(browser, {
      viewport: PHONE, deviceScaleFactor: 1, isMobile: true, hasTouch: true, locale: 'fr-FR', extraHTTPHeaders: { 'Accept-Language': 'fr-FR,fr;q=0.9' },
    });
    try {
      await page.goto(`${t.url}/f/${created.id}`);
      expect(await htmlLangDir(page)).to.deep.equal(['fr', 'ltr', 'ltr']);
      await page.getByRole('heading', { name: 'Enquête clients' }).waitFor();
      expect(await page.locator('.fs-progress-text').textContent()).to.equal('Page 1 sur 2');
      expect(await page.locator('.fs-required-note').textContent()).to.equal('Les questions marquées *d’un astérisque sont obligatoires.');
      await page.getByRole('button', { name: 'Suivant' }).click();
      expect(await errorOf(page, 'fld_name').textContent()).to.equal('Ce champ est obligatoire.');
      expect(await errorOf(page, 'fld_store').textContent()).to.equal('Veuillez choisir une réponse.');
      await page.locator('#fs-fld_email-input').fill('pas-une-adresse');
      await page.locator('#fs-fld_name-input').focus();
      await page.getByRole('button', { name: 'Suivant' }).click();
      expect(await errorOf(page, 'fld_email').textContent()).to.equal('Veuillez saisir une adresse e-mail valide.');
      expect(await page.locator('#fs-fld_city-input option').first().textContent()).to.equal('Choisissez une option');
      await shot(page, 'languages-fr-errors-phone');

      await page.locator('#fs-fld_name-input').fill('Ada Lovelace');
      await page.locator('#fs-fld_email-input').fill('ada@example.com');
      await page.getByLabel('Aéroport').check();
      await page.getByRole('button', { name: 'Suivant' }).click();
      await page.getByRole('heading', { name: 'Votre visite' }).waitFor();
      expect(await page.getByRole('button', { name: 'Retour' }).isVisible()).to.equal(true);
      expect(await page.locator('.fs-file-button').textContent()).to.equal('Choisir des fichiers');
      expect(await page.locator('label.fs-choice--stars').first().textContent()).to.equal('★1 sur 5 étoiles');
      await page.getByRole('button', { name: 'Envoyer' }).click();
      expect(await errorOf(page, 'fld_rating').textContent()).to.equal('Veuillez choisir une réponse.');
      await page.locator('label.fs-choice--stars').nth(3).click();
      await page.getByRole('button', { name: 'Envoyer' }).click();
      await page.getByText('Merci !').waitFor();

      const list = await call(t.url, 'GET', `/v1/forms/${created.id}/submissions`, { key: tenant.key });
      const [submission] = list.body.submissions;
      expect(submission.language).to.equal('fr');
      expect(submission.data).to.include({ fld_store: 'airport', fld_rating: 4 });
      expect(problems).to.deep.equal([]);
    } finally {
      await context.close();
    }
  });

  it('writes Arabic right to left for ?lang=ar, whatever the browser asks for', async () => {
    const { context, page, problems } = await openPage(browser, {
      viewport: PHONE, deviceScaleFactor: 1, isMobile: true, hasTouch: true, extraHTTPHeaders: { 'Accept-Language': 'fr-FR' },
    });
    try {
      await page.goto(`${t.url}/f/${created.id}?lang=ar`);
      expect(await htmlLangDir(page)).to.deep.equal(['ar', 'rtl', 'rtl']);
      await page.getByRole('heading', { name: 'استبيان العملاء' }).waitFor();
      // Untranslated texts fall back to the form's own, one by one.
      expect(await page.locator('.fs-description').textContent()).to.equal('Two minutes, two pages.');
      await page.getByRole('button', { name: 'التالي' }).click();
      expect(await errorOf(page, 'fld_name').textContent()).to.equal('هذا الحقل إلزامي.');
      expect(await errorOf(page, 'fld_store').textContent()).to.equal('يُرجى اختيار إجابة.');
      // Mirrored: a label's text starts at the right edge of its field.
      const [text, box] = await page.evaluate(() => {
        const range = document.createRange();
        range.selectNodeContents(document.querySelector('label[for="fs-fld_name-input"]')!.firstChild!);
        const words = range.getBoundingClientRect();
        const field = document.getElementById('fs-fld_name-input')!.getBoundingClientRect();
        return [{ left: words.left, right: words.right }, { left: field.left, right: field.right }];
      });
      expect(Math.abs(text.right - box.right)).to.be.below(2);
      expect(text.left).to.be.above(box.left + (box.right - box.left) / 2);
      await shot(page, 'languages-ar-errors-phone');

      await page.locator('#fs-fld_name-input').fill('أحمد');
      await page.locator('#fs-fld_email-input').fill('ahmad@example.com');
      await page.getByLabel('المطار').check();
      await page.getByRole('button', { name: 'التالي' }).click();
      await page.getByRole('button', { name: 'السابق' }).waitFor();
      expect(await page.locator('.fs-progress-text').textContent()).to.match(/^الصفحة [2٢] من [2٢]$/);
      await page.getByRole('button', { name: 'إرسال' }).click();
      expect(await errorOf(page, 'fld_rating').textContent()).to.equal('يُرجى اختيار إجابة.');
      expect(await page.locator('.fs-file-button').textContent()).to.equal('اختر ملفات');
      await shot(page, 'languages-ar-page2-phone');
      expect(problems).to.deep.equal([]);
    } finally {
      await context.close();
    }
  });

  describe('embedded', () => {
    let host: LoopbackServer;
    before(async () => {
      host = await startLoopbackServer((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><html lang="en"><head><title>Partner</title></head><body>
<script src="${t.url}/embed.js" data-form="${created.id}" data-lang="fr" async></script></body></html>`);
      });
    });
    after(async () => host?.close());

    it('passes its data-lang through to the frame', async () => {
      const { context, page } = await openPage(browser, { viewport: { width: 800, height: 900 } });
      try {
        await page.goto(`${host.origin}/`);
        await page.waitForFunction(() => Boolean(document.querySelector('iframe.formservice-embed')?.getAttribute('src')));
        const src = new URL((await page.locator('iframe.formservice-embed').getAttribute('src'))!);
        expect(src.searchParams.get('lang')).to.equal('fr');
        const frame = page.frameLocator('iframe.formservice-embed');
        await frame.getByRole('button', { name: 'Suivant' }).waitFor();
        expect(await frame.locator('html').getAttribute('lang')).to.equal('fr');
      } finally {
        await context.close();
      }
    });
  });
});

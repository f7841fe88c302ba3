import { expect } from 'chai';
import { CATALOGUES, LANGUAGES, placeholdersOf, textDirection, translator, type MessageKey, type PluralForms } from '../../src/domain/public/messages';

const english = CATALOGUES.en;
const keys = Object.keys(english) as MessageKey[];

function variants(message: string | PluralForms): string[] {
  return typeof message === 'string' ? [message] : Object.values(message).filter((text): text is string => typeof text === 'string');
}

describe('the hosted page\'s message catalogues', () => {
  it('ships the ten languages, Arabic right to left', () => {
    expect([...LANGUAGES].sort()).to.deep.equal(['ar', 'de', 'en', 'es', 'fr', 'it', 'ja', 'nl', 'pl', 'pt']);
    expect(LANGUAGES.filter((language) => textDirection(language) === 'rtl')).to.deep.equal(['ar']);
  });

  for (const language of LANGUAGES) {
    describe(language, () => {
      const catalogue = CATALOGUES[language];

      it('has every key of English and no other', () => {
        expect(Object.keys(catalogue).sort()).to.deep.equal([...keys].sort());
      });

      it('names the same placeholders as English in every text (a plural form may leave out {count})', () => {
        const wrong: string[] = [];
        for (const key of keys) {
          const expected = placeholdersOf(variants(english[key]).join(' '));
          const message = catalogue[key];
          if (typeof message !== typeof english[key]) wrong.push(`${key}: plural in one language, plain text in the other`);
          for (const text of variants(message)) {
            const found = placeholdersOf(text);
            const needed = typeof message === 'string' ? expected : expected.filter((name) => name !== 'count');
            if (found.some((name) => !expected.includes(name)) || needed.some((name) => !found.includes(name))) {
              wrong.push(`${key}: ${JSON.stringify(text)} names ${found.join(',') || 'none'}, English ${expected.join(',') || 'none'}`);
            }
          }
        }
        expect(wrong).to.deep.equal([]);
      });

      it('has a form for every plural category the language uses, and no empty text', () => {
        const categories = new Intl.PluralRules(language).resolvedOptions().pluralCategories;
        const missing: string[] = [];
        for (const key of keys) {
          const message = catalogue[key];
          if (typeof message === 'string') {
            if (message.trim() === '' && key !== 'listSeparator') missing.push(`${key}: empty`);
            continue;
          }
          for (const category of categories) {
            if (typeof message[category as keyof PluralForms] !== 'string') missing.push(`${key}.${category}`);
          }
        }
        expect(missing).to.deep.equal([]);
      });

      if (language !== 'en') {
        it('is translated, not English copied', () => {
          const same = keys.filter((key) => typeof english[key] === 'string' && english[key] === catalogue[key] && (english[key] as string).length > 12);
          expect(same).to.deep.equal([]);
        });
      }
    });
  }

  describe('the translator', () => {
    it('fills placeholders, numbers as the language writes them', () => {
      expect(translator('en').t('pageOf', { position: 2, total: 3 })).to.equal('Page 2 of 3');
      expect(translator('fr').t('pageOf', { position: 2, total: 3 })).to.equal('Page 2 sur 3');
      expect(translator('de').t('between', { min: 1500, max: 2.5 })).to.equal('Bitte geben Sie eine Zahl zwischen 1.500 und 2,5 ein.');
      expect(translator('ar').t('pageOf', { position: 2, total: 3 })).to.match(/^الصفحة [2٢] من [3٣]$/);
    });

    it('chooses plural forms through Intl.PluralRules', () => {
      const pl = translator('pl');
      expect(pl.t('waitSeconds', { count: 1 })).to.equal('1 sekundę');
      expect(pl.t('waitSeconds', { count: 3 })).to.equal('3 sekundy');
      expect(pl.t('waitSeconds', { count: 5 })).to.equal('5 sekund');
      expect(pl.t('waitSeconds', { count: 22 })).to.equal('22 sekundy');
      const ar = translator('ar');
      expect(ar.t('waitMinutes', { count: 1 })).to.equal('دقيقة واحدة');
      expect(ar.t('waitMinutes', { count: 2 })).to.equal('دقيقتين');
      expect(ar.t('waitMinutes', { count: 5 })).to.match(/^[5٥] دقائق$/);
      expect(translator('en').t('hintFiles', { count: 1 })).to.equal('Up to 1 file.');
      expect(translator('en').t('hintFiles', { count: 4 })).to.equal('Up to 4 files.');
      expect(translator('ja').t('hintFiles', { count: 4 })).to.equal('最大 4 ファイル。');
    });

    it('writes sizes with Intl units', () => {
      expect(translator('en').bytes(10 * 1024 * 1024)).to.equal('10.0 MB');
      expect(translator('fr').bytes(10 * 1024 * 1024)).to.match(/^10,0\s?Mo$/);
      expect(translator('en').bytes(500)).to.equal('500 bytes');
    });
  });
});

import { expect } from 'chai';
import type { Field, FieldType } from '../../src/domain/forms/types';
import { validateFieldValue } from '../../src/domain/submissions/validate';
import { CATALOGUES, type Language } from '../../src/domain/public/messages';
import { problemText, t, useLanguage } from '../../src/public/browser/i18n';
import { failureMessage, requiredMessage, uploadHint } from '../../src/public/browser/values';
import { fileLimits } from '../../src/domain/files/rules';

function field(type: FieldType, config: Record<string, unknown> = {}, validationRules: Record<string, unknown> = {}): Field {
  return { id: 'f', type, label: 'F', placeholder: null, description: null, required: true, config, validationRules, order: 0, pageId: null, conditionalLogic: null };
}

/** The page in `language`, with the words the hosted page carries for it. */
const speak = (language: Language) => useLanguage(language, CATALOGUES[language]);

const options = { options: [{ label: 'A', value: 'a' }, { label: 'B', value: 'b' }] };

/** A value each field type refuses, with the shared validator's (English) message for it. */
const refusals: Array<[string, Field, unknown]> = [
  ['email', field('email'), 'not-an-address'],
  ['url', field('url'), 'ftp://x'],
  ['phone', field('phone'), 'call me'],
  ['date', field('date'), '2026-02-30'],
  ['number', field('number'), 'many'],
  ['number below min', field('number', {}, { min: 5 }), 2],
  ['number above max', field('number', {}, { max: 5 }), 9],
  ['text too short', field('text', {}, { minLength: 3 }), 'ab'],
  ['text too long', field('text', { maxLength: 2 }), 'abc'],
  ['text pattern', field('text', {}, { pattern: '^[0-9]+$' }), 'abc'],
  ['text not text', field('text'), 42],
  ['radio', field('radio', options), 'c'],
  ['checkbox list', field('checkbox', options), ['c']],
  ['consent', field('checkbox'), false],
  ['ranking', field('ranking', options), ['a']],
  ['rating', field('rating', { max: 5 }), 9],
  ['rating not whole', field('rating', { max: 5 }), 2.5],
  ['name', field('name'), 'Ada'],
  ['signature', field('signature'), 'scribble'],
  ['file', field('file-upload'), 'file.pdf'],
  ['files', field('file-upload', { maxFiles: 2 }), [{ uploadId: 'upl_1' }, { uploadId: 'upl_2' }, { uploadId: 'upl_3' }]],
  ['payment', field('payment', { amount: 100, currency: 'eur' }), 'card'],
];

describe('the hosted page\'s words in the page\'s language', () => {
  afterEach(() => useLanguage('en'));

  for (const [name, subject, value] of refusals) {
    it(`says why a value is refused in French: ${name}`, () => {
      const english = validateFieldValue(subject, value);
      expect(english, 'the validator refuses it').to.be.a('string');
      speak('fr');
      const french = problemText(english!);
      expect(french, english!).to.not.equal(english);
      expect(french).to.match(/^(Veuillez|Cette|Ce |Le |La )/);
    });
  }

  it('leaves a message it does not know as it came', () => {
    speak('fr');
    expect(problemText('Something the server said')).to.equal('Something the server said');
  });

  it('words required fields, failures and upload hints in the chosen language', () => {
    speak('de');
    expect(requiredMessage(field('radio', options))).to.equal('Bitte wählen Sie eine Antwort.');
    expect(t('next')).to.equal('Weiter');
    expect(failureMessage(429, '120')).to.equal('Gerade gehen zu viele Antworten ein. Bitte warten Sie 2 Minuten und versuchen Sie es erneut.');
    speak('pl');
    expect(failureMessage(429, '5')).to.equal('W tej chwili jest zbyt wiele zgłoszeń. Poczekaj 5 sekund i spróbuj ponownie.');
    speak('ja');
    expect(uploadHint(fileLimits({ config: { maxFiles: 3, accept: ['image/*'] } }, 2 * 1024 * 1024))).to.equal('1 ファイルあたり 2.0 MB まで。 対応形式：画像。 最大 3 ファイル。');
    useLanguage('nope', CATALOGUES.de);
    expect(t('next')).to.equal('Next');
    // Words missing from what the page carries are said in English.
    useLanguage('fr', { next: 'Suivant' });
    expect([t('next'), t('back')]).to.deep.equal(['Suivant', 'Back']);
  });
});

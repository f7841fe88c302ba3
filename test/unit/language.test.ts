import { expect } from 'chai';
import { acceptedLanguages, languageFromHeader, requestedTag, resolveLanguage, supportedLanguage } from '../../src/domain/public/language';

describe('which language the hosted page speaks', () => {
  it('reads Accept-Language by q-value, ties in the header\'s order, dropping q=0', () => {
    expect(acceptedLanguages('de;q=0.5, fr-FR, en;q=0.8, it;q=0')).to.deep.equal(['fr-FR', 'en', 'de']);
    expect(acceptedLanguages('es, pt')).to.deep.equal(['es', 'pt']);
    expect(acceptedLanguages('nl;q=abc, pl')).to.deep.equal(['pl']);
    expect(acceptedLanguages('')).to.deep.equal([]);
    expect(acceptedLanguages(undefined)).to.deep.equal([]);
  });

  it('falls back from a region to its language and passes over unsupported ones', () => {
    expect(supportedLanguage('fr-FR')).to.equal('fr');
    expect(supportedLanguage('PT_br')).to.equal('pt');
    expect(supportedLanguage('sv')).to.equal(null);
    expect(languageFromHeader('sv-SE, nb;q=0.9, de-AT;q=0.8, en;q=0.7')).to.equal('de');
    expect(languageFromHeader('*')).to.equal(null);
  });

  it('takes ?lang= first, then the form\'s language, then Accept-Language, then English', () => {
    expect(resolveLanguage({ query: 'ar', pinned: 'fr', acceptLanguage: 'de' })).to.equal('ar');
    expect(resolveLanguage({ query: 'xx', pinned: 'fr', acceptLanguage: 'de' })).to.equal('fr');
    expect(resolveLanguage({ query: ['ar', 'fr'], pinned: null, acceptLanguage: 'de' })).to.equal('de');
    expect(resolveLanguage({ pinned: 'ja-JP', acceptLanguage: 'de' })).to.equal('ja');
    expect(resolveLanguage({ acceptLanguage: 'fr-FR,fr;q=0.9,en-US;q=0.8' })).to.equal('fr');
    expect(resolveLanguage({ acceptLanguage: 'sv' })).to.equal('en');
    expect(resolveLanguage({})).to.equal('en');
  });

  it('reads a bounded part of a hostile header', () => {
    const header = `${'zz;q=0.1,'.repeat(10_000)}fr`;
    expect(acceptedLanguages(header).length).to.be.at.most(20);
    expect(languageFromHeader(header)).to.equal(null);
  });

  it('names the tag asked for in the chosen language (which regional translation), else none', () => {
    expect(requestedTag({ query: 'pt-BR' }, 'pt')).to.equal('pt-BR');
    expect(requestedTag({ acceptLanguage: 'de;q=0.9, pt-BR' }, 'pt')).to.equal('pt-BR');
    expect(requestedTag({ query: 'zz', pinned: 'fr', acceptLanguage: 'en, fr-CA' }, 'fr')).to.equal('fr-CA');
    expect(requestedTag({ pinned: 'fr', acceptLanguage: 'en' }, 'fr')).to.equal(null);
    expect(requestedTag({ query: ['pt-BR'] }, 'en')).to.equal(null);
  });
});

import { expect } from 'chai';
import { FileLinks, signedFileUrl, verifyFileLink, withFileLinks, fileLinkKey } from '../../src/domain/files/links';

const key = fileLinkKey(Buffer.alloc(32, 7));
const uploadId = 'upl_0123456789ABCDEFGHIJ';
const parts = (url: string) => {
  const parsed = new URL(url);
  return { path: parsed.pathname, expires: parsed.searchParams.get('expires')!, signature: parsed.searchParams.get('signature')! };
};

describe('file links', () => {
  const now = Date.parse('2026-11-25T10:00:00Z');
  const expires = now / 1000 + 3600;
  const url = signedFileUrl(key, 'https://forms.example', 'download', uploadId, expires);

  it('signs the upload id and the expiry, for one purpose', () => {
    const { path, expires: e, signature } = parts(url);
    expect(path).to.equal(`/files/${uploadId}`);
    expect(verifyFileLink(key, 'download', uploadId, e, signature, now)).to.equal('ok');
    expect(verifyFileLink(key, 'download', uploadId, e, signature, (expires + 1) * 1000)).to.equal('expired');
    expect(verifyFileLink(key, 'download', uploadId, String(expires + 60), signature, now)).to.equal('invalid');
    expect(verifyFileLink(key, 'download', 'upl_0123456789ABCDEFGHIK', e, signature, now)).to.equal('invalid');
    expect(verifyFileLink(key, 'upload', uploadId, e, signature, now)).to.equal('invalid');
    expect(verifyFileLink(fileLinkKey(Buffer.alloc(32, 8)), 'download', uploadId, e, signature, now)).to.equal('invalid');
    expect(verifyFileLink(key, 'download', uploadId, e, `${signature}A`, now)).to.equal('invalid');
    expect(verifyFileLink(key, 'download', uploadId, undefined, signature, now)).to.equal('invalid');
    expect(verifyFileLink(key, 'download', uploadId, e, ['x'], now)).to.equal('invalid');
    expect(verifyFileLink(key, 'download', '../etc', e, signature, now)).to.equal('invalid');
  });

  it('shows stored files (alone or listed) as links, and leaves every other value alone', () => {
    const links = new FileLinks(key, 'https://forms.example', 600);
    const file = { uploadId, name: 'a.pdf', type: 'application/pdf', size: 12 };
    const data = { fld_a: file, fld_b: [file, file], fld_c: 'text', fld_d: { name: 'x', type: 'y', size: 1, dataUrl: 'data:,' }, fld_e: [] };
    const shown = links.presentValues(data);
    expect(shown.fld_a).to.deep.include({ name: 'a.pdf', type: 'application/pdf', size: 12 });
    expect(Object.keys(shown.fld_a as object)).to.deep.equal(['name', 'type', 'size', 'url']);
    expect((shown.fld_b as any[]).map((f) => f.name)).to.deep.equal(['a.pdf', 'a.pdf']);
    expect(shown.fld_c).to.equal('text');
    expect(shown.fld_d).to.equal(data.fld_d);
    expect(shown.fld_e).to.equal(data.fld_e);
    const { expires: e, signature } = parts((shown.fld_a as any).url);
    expect(verifyFileLink(key, 'download', uploadId, e, signature)).to.equal('ok');
    const plain = { fld_c: 'text' };
    expect(links.presentValues(plain)).to.equal(plain);
  });

  it('puts fresh links into a stored event payload, in data and rawData', () => {
    const links = new FileLinks(key, 'https://forms.example', 600);
    const file = { uploadId, name: 'a.pdf', type: 'application/pdf', size: 12 };
    const payload = JSON.stringify({ id: 'evt_1', data: { submission: { data: { Photo: file }, rawData: { fld_a: file } } } });
    const sent = JSON.parse(withFileLinks(payload, links));
    expect(sent.data.submission.data.Photo.url).to.match(/^https:\/\/forms\.example\/files\/upl_/);
    expect(sent.data.submission.rawData.fld_a).to.have.keys('name', 'type', 'size', 'url');
    const noFiles = JSON.stringify({ id: 'evt_2', data: { submission: { data: { a: 1 }, rawData: { a: 1 } } } });
    expect(withFileLinks(noFiles, links)).to.equal(noFiles);
  });
});

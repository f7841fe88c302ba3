import { expect } from 'chai';
import {
  contentProblem, declaredFileProblem, DEFAULT_FILE_MAX_SIZE, fileLimits, sniffType, typeAccepted,
} from '../../src/domain/files/rules';

const bytes = (...parts: Array<number[] | string>) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === 'string' ? [...p].map((c) => c.charCodeAt(0)) : p)));
const JPEG = bytes([0xff, 0xd8, 0xff, 0xe0], 'JFIF');
const PNG = bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'IHDR');
const PDF = bytes('%PDF-1.7\n');
const ZIP = bytes([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]);
const HEIC = bytes([0, 0, 0, 0x18], 'ftypheic', [0, 0, 0, 0]);
const MP4 = bytes([0, 0, 0, 0x20], 'ftypisom', [0, 0, 2, 0]);
const WEBP = bytes('RIFF', [0x24, 0, 0, 0], 'WEBPVP8 ');
const TEXT = bytes('name,email\nAda,ada@example.com\n');
const EXE = bytes('MZ', [0x90, 0, 3, 0, 0, 0]);

describe('file rules', () => {
  it('reads a field\'s limits: maxSize capped by UPLOAD_MAX_BYTES, defaults 10 MB and one file', () => {
    expect(fileLimits({ config: {} }, 25 * 2 ** 20)).to.deep.equal({ maxSize: DEFAULT_FILE_MAX_SIZE, maxFiles: 1, accept: [] });
    expect(fileLimits({ config: { maxSize: 50 * 2 ** 20, maxFiles: 3, accept: ['Image/*', ' .PDF'] } }, 25 * 2 ** 20))
      .to.deep.equal({ maxSize: 25 * 2 ** 20, maxFiles: 3, accept: ['image/*', '.pdf'] });
    expect(fileLimits({ config: { maxFiles: 500, accept: 'image/png,image/jpeg' } }, 100).maxFiles).to.equal(20);
    expect(fileLimits({ config: { accept: 'image/png,image/jpeg' } }, 100).accept).to.deep.equal(['image/png', 'image/jpeg']);
  });

  it('accepts by MIME type, wildcard or extension', () => {
    expect(typeAccepted([], 'x.bin', 'application/octet-stream')).to.equal(true);
    expect(typeAccepted(['image/*'], 'a.heic', 'image/heic')).to.equal(true);
    expect(typeAccepted(['image/*'], 'a.pdf', 'application/pdf')).to.equal(false);
    expect(typeAccepted(['.pdf'], 'Report.PDF', 'application/octet-stream')).to.equal(true);
    expect(typeAccepted(['image/jpeg'], 'a.jpg', 'image/jpg')).to.equal(true);
    expect(typeAccepted(['.pdf'], 'pdf', 'application/pdf')).to.equal(false);
  });

  it('checks a declared file against the field', () => {
    const limits = { maxSize: 1024 * 1024, maxFiles: 1, accept: ['image/*'] };
    expect(declaredFileProblem(limits, { name: 'photo.jpg', type: 'image/jpeg', size: 1000 })).to.equal(null);
    expect(declaredFileProblem(limits, { name: 'photo.jpg', type: 'image/jpeg', size: Math.round(2.4 * 1024 * 1024) }))
      .to.equal('photo.jpg is 2.4 MB, larger than the 1.0 MB limit');
    expect(declaredFileProblem(limits, { name: 'a.pdf', type: 'application/pdf', size: 10 })).to.contain('not accepted');
    expect(declaredFileProblem(limits, { name: '', type: 'image/png', size: 10 })).to.contain('name');
    expect(declaredFileProblem(limits, { name: 'a\nb.png', type: 'image/png', size: 10 })).to.contain('name');
    expect(declaredFileProblem(limits, { name: 'a.png', type: 'png', size: 10 })).to.contain('MIME');
    expect(declaredFileProblem(limits, { name: 'a.png', type: 'image/png', size: 0 })).to.contain('size');
    expect(declaredFileProblem(limits, { name: 'a.png', type: 'image/png', size: 1.5 })).to.contain('size');
  });

  it('recognizes files by their first bytes', () => {
    expect(sniffType(JPEG)).to.equal('image/jpeg');
    expect(sniffType(PNG)).to.equal('image/png');
    expect(sniffType(PDF)).to.equal('application/pdf');
    expect(sniffType(ZIP)).to.equal('application/zip');
    expect(sniffType(HEIC)).to.equal('image/heic');
    expect(sniffType(MP4)).to.equal('video/mp4');
    expect(sniffType(WEBP)).to.equal('image/webp');
    expect(sniffType(bytes('GIF89a'))).to.equal('image/gif');
    expect(sniffType(TEXT)).to.equal(null);
    expect(sniffType(new Uint8Array())).to.equal(null);
  });

  it('agrees with content of the declared type only', () => {
    const any = { maxSize: 100, maxFiles: 1, accept: [] };
    const images = { maxSize: 100, maxFiles: 1, accept: ['image/*'] };
    const file = (name: string, type: string) => ({ name, type, size: 10 });
    expect(contentProblem(images, file('a.jpg', 'image/jpeg'), JPEG)).to.equal(null);
    expect(contentProblem(images, file('a.jpg', 'image/jpeg'), PNG)).to.equal('The content of a.jpg is not image/jpeg');
    expect(contentProblem(images, file('a.jpg', 'image/jpeg'), TEXT)).to.not.equal(null);
    expect(contentProblem(images, file('a.heic', 'image/heic'), HEIC)).to.equal(null);
    expect(contentProblem(images, file('a.heic', 'image/heic'), MP4)).to.not.equal(null);
    expect(contentProblem(any, file('a.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'), ZIP)).to.equal(null);
    expect(contentProblem(any, file('a.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'), PDF)).to.not.equal(null);
    expect(contentProblem(any, file('a.mov', 'video/quicktime'), MP4)).to.equal(null);
    // Text types: no NUL byte and no binary signature.
    expect(contentProblem(any, file('a.csv', 'text/csv'), TEXT)).to.equal(null);
    expect(contentProblem(any, file('a.csv', 'text/csv'), bytes('a,b', [0], 'c'))).to.not.equal(null);
    expect(contentProblem(any, file('a.txt', 'text/plain'), PDF)).to.not.equal(null);
    expect(contentProblem(any, file('a.txt', 'text/plain'), bytes('MZ is a text too'))).to.equal(null);
    // A type with no known signature: fine unless its bytes are a known type the field refuses.
    expect(contentProblem({ ...any, accept: ['.step'] }, file('a.step', 'model/step'), TEXT)).to.equal(null);
    expect(contentProblem({ ...any, accept: ['.step'] }, file('a.step', 'model/step'), EXE)).to.not.equal(null);
    expect(contentProblem(any, file('a.step', 'model/step'), EXE)).to.equal(null);
  });
});

import { expect } from 'chai';
import { fileLimits } from '../../src/domain/files/rules';
import { acceptedText, declaredType, fileRefusal, uploadFailureMessage, uploadHint } from '../../src/public/browser/values';

const MB = 1024 * 1024;
const limitsOf = (config: Record<string, unknown>) => fileLimits({ config }, Number.MAX_SAFE_INTEGER);

describe('the hosted page\'s words for uploads', () => {
  it('says what a field takes: size, types in words, and how many files', () => {
    expect(uploadHint(limitsOf({}))).to.equal('Up to 10.0 MB.');
    expect(uploadHint(limitsOf({ accept: ['image/*', '.pdf', 'application/pdf'], maxFiles: 3, maxSize: 2 * MB })))
      .to.equal('Up to 2.0 MB each. Accepted: images, PDF. Up to 3 files.');
    expect(acceptedText(['video/*', '.docx', 'text/csv'])).to.equal('videos, DOCX, CSV');
  });

  it('refuses before sending a file of a type or size the field does not take, with its name', () => {
    const limits = limitsOf({ accept: ['image/*', '.pdf'], maxSize: 2 * MB });
    expect(fileRefusal(limits, { name: 'notes.txt', type: 'text/plain', size: 10 }))
      .to.equal("notes.txt can't be attached: this question accepts images, PDF only.");
    expect(fileRefusal(limits, { name: 'scan.pdf', type: 'application/pdf', size: 3 * MB }))
      .to.equal('scan.pdf is 3.0 MB, larger than the 2.0 MB limit. Please choose a smaller file.');
    expect(fileRefusal(limits, { name: 'empty.png', type: 'image/png', size: 0 })).to.equal('empty.png is empty. Please choose another file.');
    // Accepted by extension when the browser has no type for it; at the limit exactly is within it.
    expect(fileRefusal(limits, { name: 'Scan.PDF', type: '', size: 2 * MB })).to.equal(null);
    expect(fileRefusal(limits, { name: 'photo.jpg', type: 'image/jpeg', size: 1 })).to.equal(null);
  });

  it('declares a file the browser has no type for as generic bytes', () => {
    expect(declaredType({ type: '' })).to.equal('application/octet-stream');
    expect(declaredType({ type: 'image/heic' })).to.equal('image/heic');
  });

  it('words a failed upload by its cause', () => {
    expect(uploadFailureMessage(0)).to.match(/couldn't reach the server/);
    expect(uploadFailureMessage(429, '30')).to.equal('Too many uploads right now. Please wait 30 seconds and try again.');
    expect(uploadFailureMessage(503)).to.equal('The upload did not go through. Please try again.');
  });
});

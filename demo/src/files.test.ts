import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contentTypeFor, decryptedName, encryptedName, formatBytes, previewKind } from './files.js';

describe('names', () => {
  it('takes .enc off (any case), and marks names without it', () => {
    expect(decryptedName('report.pdf.enc')).toBe('report.pdf');
    expect(decryptedName('REPORT.PDF.ENC')).toBe('REPORT.PDF');
    expect(decryptedName('C:\\Users\\bob\\notes.txt.enc')).toBe('notes.txt');
    expect(decryptedName('../../etc/passwd.enc')).toBe('passwd');
    expect(decryptedName('b60f8aa4-a339')).toBe('b60f8aa4-a339.decrypted');
    expect(decryptedName('.enc')).toBe('.enc.decrypted');
    expect(decryptedName('')).toBe('decrypted');
  });

  it('gives back the name a file was encrypted under', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((s) => !/[/\\]/.test(s)),
        (name) => {
          expect(decryptedName(encryptedName(name))).toBe(name);
        },
      ),
    );
  });
});

describe('types', () => {
  it('knows the previewable types by extension, case-insensitively', () => {
    expect(contentTypeFor('a.TXT')).toBe('text/plain; charset=utf-8');
    expect(contentTypeFor('photo.jpeg')).toBe('image/jpeg');
    expect(contentTypeFor('x.pdf')).toBe('application/pdf');
    expect(contentTypeFor('archive.tar.gz')).toBe('application/octet-stream');
    expect(contentTypeFor('noextension')).toBe('application/octet-stream');
    expect(previewKind(contentTypeFor('a.txt'))).toBe('text');
    expect(previewKind(contentTypeFor('a.svg'))).toBe('image');
    expect(previewKind(contentTypeFor('a.pdf'))).toBe('pdf');
    expect(previewKind(contentTypeFor('a.zip'))).toBeUndefined();
  });

  it('formats sizes in binary units', () => {
    expect(formatBytes(0)).toBe('0 bytes');
    expect(formatBytes(1023)).toBe('1023 bytes');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(1024 ** 3)).toBe('1.0 GiB');
    expect(formatBytes(250 * 1024 ** 2)).toBe('250 MiB');
    expect(formatBytes(-1)).toBe('?');
  });
});

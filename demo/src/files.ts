/**
 * File names and types: what the demo calls its outputs, and what a decrypted file is (for the
 * Content-Type of the download and whether it can be previewed).
 */

export const ENC_SUFFIX = '.enc';
export const TEXT_NAME = 'message.txt';
/** Several files are sealed as one ZIP. */
export const BUNDLE_NAME = 'files.zip';

/** The ciphertext's name for a plaintext name. */
export const encryptedName = (plainName: string): string => `${plainName}${ENC_SUFFIX}`;

/** The plaintext's name from the ciphertext's: "report.pdf.enc" → "report.pdf". */
export function decryptedName(encName: string): string {
  const base = encName.split(/[/\\]/).pop() ?? '';
  if (base.toLowerCase().endsWith(ENC_SUFFIX) && base.length > ENC_SUFFIX.length)
    return base.slice(0, -ENC_SUFFIX.length);
  return base === '' ? 'decrypted' : `${base}.decrypted`;
}

const TYPES: Record<string, string> = {
  txt: 'text/plain; charset=utf-8',
  md: 'text/plain; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  json: 'application/json',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  svg: 'image/svg+xml',
  zip: 'application/zip',
};

export function contentTypeFor(name: string): string {
  const dot = name.lastIndexOf('.');
  const ext = dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
  return TYPES[ext] ?? 'application/octet-stream';
}

export type PreviewKind = 'text' | 'image' | 'pdf';

/** Largest plaintext previewed in the page (previews are held in memory; downloads are not). */
export const PREVIEW_LIMIT = 32 * 1024 * 1024;

export function previewKind(contentType: string): PreviewKind | undefined {
  if (contentType.startsWith('text/') || contentType === 'application/json') return 'text';
  // SVG can carry script: it is shown as an <img> (which runs none), like any other image.
  if (contentType.startsWith('image/')) return 'image';
  if (contentType === 'application/pdf') return 'pdf';
  return undefined;
}

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

import { describe, expect, it } from 'vitest';
import { expectLinearTime } from '../test/linear-time.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { findEndRecord, listZipEntries, type ZipReadable } from './zip-entries.js';

/**
 * The client's parsers of a sender's bytes, fed the worst input we could craft at about 1 MiB and a
 * benign one of the same size (test/linear-time.ts): a received bundle's end record search and its
 * central directory (extra fields, names, the safe display name) run in time linear in their size.
 */

const refused = (error: unknown) => error instanceof ClientError && error.code === ClientErrorCode.BUNDLE_INVALID;

const inMemory = (bytes: Uint8Array): ZipReadable => ({
  size: bytes.length,
  read: (offset, length) => Promise.resolve(bytes.subarray(offset, offset + length)),
});

/** `unit` repeated over `n` bytes. */
function filled(n: number, unit: number[]): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = unit[i % unit.length]!;
  return out;
}

/**
 * A bundle of one empty stored entry whose central directory is about `n` bytes of records, each
 * with a variable part (name or extra fields, at most 65 535 bytes) taken from `part`. Every record
 * points at the one local header, so the directory is all there is to parse.
 */
function bundleWithDirectory(n: number, part: (length: number) => { name: Uint8Array; extra: Uint8Array }) {
  const records: Uint8Array[] = [];
  let size = 0;
  while (size < n) {
    const { name, extra } = part(Math.max(1, Math.min(0xffff, n - size - 46)));
    const record = new Uint8Array(46 + name.length + extra.length);
    const v = new DataView(record.buffer);
    v.setUint32(0, 0x02014b50, true);
    v.setUint16(8, 0x0800, true);
    v.setUint16(28, name.length, true);
    v.setUint16(30, extra.length, true);
    record.set(name, 46);
    record.set(extra, 46 + name.length);
    records.push(record);
    size += record.length;
  }
  const bytes = new Uint8Array(30 + size + 22);
  const v = new DataView(bytes.buffer);
  v.setUint32(0, 0x04034b50, true);
  let at = 30;
  for (const record of records) {
    bytes.set(record, at);
    at += record.length;
  }
  v.setUint32(at, 0x06054b50, true);
  v.setUint16(at + 8, records.length, true);
  v.setUint16(at + 10, records.length, true);
  v.setUint32(at + 12, size, true);
  v.setUint32(at + 16, 30, true);
  return { bytes, entries: records.length };
}

const list = ({ bytes, entries }: { bytes: Uint8Array; entries: number }) =>
  listZipEntries(inMemory(bytes), { maxEntries: entries });

describe('ZIP bundles (client/zip-entries.ts)', () => {
  it('the end record search: a tail where every 4 bytes are its signature', async () => {
    // Every 8th byte starts a signature whose comment length (0) never reaches the end: each is a
    // candidate to check, and the whole tail is scanned.
    const signature = [0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    await expectLinearTime('findEndRecord, signatures everywhere', (n) => ({
      crafted: () => expect(findEndRecord(filled(n, signature))).toBe(-1),
      benign: () => findEndRecord(filled(n, [0x50, 0x4b, 0x03, 0x04])),
    }));
    // Through the listing, which looks only at the last 65 557 bytes whatever the bundle's size.
    await expectLinearTime(
      'listZipEntries, signatures everywhere',
      (n) => {
        const crafted = filled(n, signature);
        const benign = bundleWithDirectory(n, (length) => ({ name: filled(length, [0x61]), extra: new Uint8Array(0) }));
        return { crafted: () => listZipEntries(inMemory(crafted)), benign: () => list(benign) };
      },
      { refused },
    );
  });

  it('the central directory: floods of empty extra fields, separators, hidden characters', async () => {
    const benign = (n: number) =>
      bundleWithDirectory(n, (length) => ({ name: filled(length, [0x61]), extra: new Uint8Array(0) }));
    const crafted = {
      // 4-byte extra fields (an unknown id, no data): the most fields a directory can hold.
      'empty extra fields': (length: number) => ({
        name: new Uint8Array(0),
        extra: filled(length - (length % 4), [0x99, 0x99, 0, 0]),
      }),
      // A name of separators only: every segment empty, none usable as the display name.
      'a name of slashes': (length: number) => ({ name: filled(length, [0x2f]), extra: new Uint8Array(0) }),
      'a name of backslashes and dots': (length: number) => ({
        name: filled(length, [0x2e, 0x2e, 0x5c]),
        extra: new Uint8Array(0),
      }),
      // U+202E in UTF-8: every character removed from the display name.
      'a name of bidi overrides': (length: number) => ({
        name: filled(length - (length % 3), [0xe2, 0x80, 0xae]),
        extra: new Uint8Array(0),
      }),
    };
    for (const [what, part] of Object.entries(crafted)) {
      await expectLinearTime(
        `listZipEntries, ${what}`,
        (n) => {
          const bundle = bundleWithDirectory(n, part);
          const plain = benign(n);
          return { crafted: () => list(bundle), benign: () => list(plain) };
        },
        { refused },
      );
    }
  });
});

import { makeZip } from 'client-zip';
import fc from 'fast-check';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { sealStream, type SealOptions } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { openRandomAccess } from '../lib/random-access.js';
import { expectSameBytes } from '../test/bytes.js';
import { collector, readAll } from '../test/streams.js';
import { crc32Update } from './crc32.js';
import { ClientError, ClientErrorCode } from './errors.js';
import {
  findEndRecord,
  listZipEntries,
  zipEntryStream,
  zipFromRandomAccess,
  type ZipEntry,
  type ZipReadable,
} from './zip-entries.js';
import { decodeZipName, displayName } from './zip-names.js';

/**
 * Entries of a ZIP bundle read in place (client/zip-entries.ts): bundles made by client-zip, as
 * senders make them, and ZIP64 records crafted by hand (client-zip writes them only past 4 GiB);
 * then each structure damaged the ways a hostile sender could, which must end in BUNDLE_INVALID
 * and never in a hang, an untyped error or a stream that closes on wrong bytes.
 */

const MIB = 1024 * 1024;
const WHEN = new Date(2024, 0, 2, 3, 4, 6);

type Input = { name: string; input?: Uint8Array; lastModified?: Date };

async function zipOf(files: Input[]): Promise<Uint8Array<ArrayBuffer>> {
  const stream = makeZip(files.map((f) => ({ lastModified: WHEN, ...f })));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

const pattern = (n: number, seed = 1) => {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 9)) & 255;
  return out;
};

/** A bundle in memory that records the spans read from it, as [offset, end) pairs. */
function source(bytes: Uint8Array): ZipReadable & { reads: [number, number][] } {
  const reads: [number, number][] = [];
  return {
    size: bytes.length,
    reads,
    read: (offset, length) => {
      reads.push([offset, offset + length]);
      return Promise.resolve(bytes.slice(offset, offset + length));
    },
  };
}

/** The error `run` fails with, which must be a ClientError with `code`. */
async function failure(run: () => Promise<unknown>, code: ClientErrorCode = ClientErrorCode.BUNDLE_INVALID) {
  let caught: unknown;
  try {
    await run();
  } catch (error) {
    caught = error;
  }
  expect(caught, 'a ClientError').toBeInstanceOf(ClientError);
  expect((caught as ClientError).code).toBe(code);
  return caught as ClientError;
}

const dv = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Where client-zip's records are (it writes no comment, so the end record is the last 22 bytes). */
function layout(bytes: Uint8Array) {
  const end = bytes.length - 22;
  const cd = dv(bytes).getUint32(end + 16, true);
  return { end, cd, cdSize: dv(bytes).getUint32(end + 12, true) };
}

/** A copy of `bytes` with `patch` applied to it. */
function patched(bytes: Uint8Array, patch: (view: DataView, copy: Uint8Array) => void): Uint8Array {
  const copy = bytes.slice();
  patch(dv(copy), copy);
  return copy;
}

const three = [
  { name: 'one.txt', input: pattern(100_000, 1) },
  { name: 'two.bin', input: pattern(200_000, 2) },
  { name: 'empty', input: new Uint8Array(0) },
];

describe('listing and reading bundles made by client-zip', () => {
  it('one entry: every field, and its bytes', async () => {
    const data = pattern(5000);
    const bundle = await zipOf([{ name: 'notes.txt', input: data }]);
    const [entry, ...rest] = await listZipEntries(source(bundle));
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({
      name: 'notes.txt',
      path: 'notes.txt',
      size: 5000,
      compressedSize: 5000,
      method: 0,
      crc32: crc32(data),
      offset: 0,
      centralDirectoryOffset: layout(bundle).cd,
      directory: false,
      supported: true,
    });
    expect(entry!.lastModified?.getTime()).toBe(WHEN.getTime());
    expectSameBytes(await readAll(zipEntryStream(source(bundle), entry!)), data);
  });

  it('three entries, one of them empty, each read alone', async () => {
    const bundle = await zipOf(three);
    const file = source(bundle);
    const entries = await listZipEntries(file);
    expect(entries.map((e) => [e.name, e.size])).toEqual([
      ['one.txt', 100_000],
      ['two.bin', 200_000],
      ['empty', 0],
    ]);
    for (const [i, entry] of entries.entries()) {
      expectSameBytes(await readAll(zipEntryStream(file, entry)), three[i]!.input, entry.name);
    }
  });

  it('an empty bundle lists nothing; zero bytes, or fewer than an end record, are not a ZIP', async () => {
    expect(await listZipEntries(source(await zipOf([])))).toEqual([]);
    await failure(() => listZipEntries(source(new Uint8Array(0))));
    await failure(() => listZipEntries(source(new Uint8Array(21))));
  });

  it('listing reads only the tail; an entry costs its local header and its bytes', async () => {
    const bundle = await zipOf(three);
    const file = source(bundle);
    const entries = await listZipEntries(file);
    // The directory of three entries sits inside the last 65 557 bytes: one read in all.
    expect(file.reads).toEqual([[bundle.length - 65_557, bundle.length]]);

    file.reads.length = 0;
    const second = entries[1]!;
    await readAll(zipEntryStream(file, second));
    const dataStart = second.offset + 30 + 'two.bin'.length;
    expect(file.reads).toEqual([
      [second.offset, second.offset + 30],
      [dataStart, dataStart + 200_000],
    ]);
  });

  it('a directory larger than the tail is read in one read of its stated size', async () => {
    const many = Array.from({ length: 2000 }, (_, i) => ({
      name: `file-${String(i).padStart(40, '0')}`,
      input: pattern(3, i),
    }));
    const bundle = await zipOf(many);
    const { cd, cdSize } = layout(bundle);
    expect(cdSize).toBeGreaterThan(65_557);
    const file = source(bundle);
    const entries = await listZipEntries(file);
    expect(entries).toHaveLength(2000);
    expect(entries[1999]!.name).toBe(many[1999]!.name);
    expect(file.reads).toEqual([
      [bundle.length - 65_557, bundle.length],
      [cd, cd + cdSize],
    ]);
  });

  it('a large entry is read in pieces of at most 1 MiB, as they are asked for', async () => {
    const data = pattern(2.5 * MIB);
    const bundle = await zipOf([{ name: 'big', input: data }]);
    const file = source(bundle);
    const [entry] = await listZipEntries(file);
    file.reads.length = 0;
    const reader = zipEntryStream(file, entry!).getReader();
    expect(file.reads, 'nothing read before it is asked').toEqual([]);
    const first = await reader.read();
    expect(first.value).toHaveLength(MIB);
    expect(file.reads).toHaveLength(2);
    const whole = new Uint8Array(data.length);
    let filled = 0;
    for (let next = first; !next.done; next = await reader.read()) {
      whole.set(next.value, filled);
      filled += next.value.length;
    }
    expect(filled).toBe(data.length);
    expectSameBytes(whole, data);
    expect(file.reads.slice(1).map(([a, b]) => b - a)).toEqual([MIB, MIB, MIB / 2]);
  });

  it('names: UTF-8, code page 437 without the flag, paths reduced to a safe last segment', async () => {
    const names = [
      'résumé ✓.txt',
      '日本語/資料.pdf',
      '../x',
      'a/b/c.txt',
      'C:\\Users\\me\\.bashrc',
      'invoice\u202Efdp.exe',
      'bell\u0007.txt',
    ];
    const bundle = await zipOf([...names.map((name) => ({ name, input: pattern(3) })), { name: 'docs/' }]);
    const entries = await listZipEntries(source(bundle));
    expect(entries.map((e) => e.path)).toEqual([...names, 'docs/']);
    expect(entries.map((e) => e.name)).toEqual([
      'résumé ✓.txt',
      '資料.pdf',
      'x',
      'c.txt',
      '.bashrc',
      'invoicefdp.exe',
      'bell.txt',
      'docs',
    ]);
    expect(entries.map((e) => e.directory)).toEqual([...names.map(() => false), true]);

    // client-zip always sets the UTF-8 flag in the directory; cleared, the bytes are code page 437.
    const cp437 = await zipOf([{ name: 'caf\u00e9', input: pattern(3) }]);
    const { cd } = layout(cp437);
    const named = patched(cp437, (v, copy) => {
      v.setUint16(cd + 8, v.getUint16(cd + 8, true) & ~0x0800, true);
      copy.set([0x63, 0x61, 0x66, 0x82, 0x2e], cd + 46); // "caf\x82." over the 5 name bytes
    });
    const [entry] = await listZipEntries(source(named));
    expect(entry!.path).toBe('café.');
  });

  it('displayName and decodeZipName on their own', () => {
    expect(['..', '.', '', '/', '\u202E'].map(displayName)).toEqual(Array(5).fill('unnamed'));
    expect(displayName('a/..')).toBe('a');
    expect(displayName('x/\u0000')).toBe('x');
    // Invisible characters that could hide an extension go; whitespace runs show as one space.
    expect(displayName('invoice\u2028.pdf')).toBe('invoice.pdf');
    expect(displayName('in\u200Bvoice\u00AD.pdf\u3164')).toBe('invoice.pdf');
    expect(displayName(`photo.jpg${' '.repeat(80)}.exe`)).toBe('photo.jpg .exe');
    expect(displayName('a\u3000\u3000\t b.txt')).toBe('a b.txt');
    expect(displayName('\u200B\u3164')).toBe('unnamed');
    expect(decodeZipName(Uint8Array.from([0x80, 0x9b, 0xe1, 0xff, 0x41]), false)).toBe('Ç¢ß\u00a0A');
    expect(decodeZipName(Uint8Array.from([0xff, 0x41]), true)).toBe('\ufffdA');
  });

  it('CRC-32 matches the reference vector and zlib, piece by piece', () => {
    expect(crc32Update(0, new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
    const data = pattern(100_003);
    expect(crc32Update(crc32Update(0, data.subarray(0, 40_000)), data.subarray(40_000))).toBe(crc32(data));
    // Eight bytes a step, then one at a time: every length around the step, split at every point.
    const short = pattern(41, 3);
    for (let n = 0; n <= short.length; n++) {
      const bytes = short.subarray(0, n);
      for (let cut = 0; cut <= n; cut++) {
        expect(crc32Update(crc32Update(0, bytes.subarray(0, cut)), bytes.subarray(cut)), `${n} split at ${cut}`).toBe(
          crc32(bytes),
        );
      }
    }
  });

  it('the longest ZIP comment, and a byte after it', async () => {
    const bundle = await zipOf(three);
    const commented = new Uint8Array(bundle.length + 0xffff);
    commented.set(bundle);
    commented.fill(0x50, bundle.length); // 'P' everywhere: every position looks like a signature's start
    dv(commented).setUint16(bundle.length - 2, 0xffff, true);
    const file = source(commented);
    const entries = await listZipEntries(file);
    expect(entries.map((e) => e.name)).toEqual(['one.txt', 'two.bin', 'empty']);
    expectSameBytes(await readAll(zipEntryStream(file, entries[1]!)), three[1]!.input);
    // The record no longer ends where its comment says: there is no end record.
    const longer = new Uint8Array(commented.length + 1);
    longer.set(commented);
    await failure(() => listZipEntries(source(longer)));
  });
});

/** A ZIP with every size and offset in ZIP64 fields, as a writer does past 4 GiB. */
function zip64Of(files: { name: string; data: Uint8Array }[], options: { endValues?: boolean } = {}) {
  const parts: Uint8Array[] = [];
  let at = 0;
  const push = (bytes: Uint8Array) => {
    parts.push(bytes);
    at += bytes.length;
  };
  const central: Uint8Array[] = [];
  for (const { name, data } of files) {
    const nameBytes = new TextEncoder().encode(name);
    const local = new Uint8Array(30 + nameBytes.length + 20);
    const l = dv(local);
    l.setUint32(0, 0x04034b50, true);
    l.setUint16(4, 45, true);
    l.setUint16(6, 0x0800, true);
    l.setUint32(14, crc32(data), true);
    l.setUint32(18, 0xffffffff, true);
    l.setUint32(22, 0xffffffff, true);
    l.setUint16(26, nameBytes.length, true);
    l.setUint16(28, 20, true);
    local.set(nameBytes, 30);
    l.setUint16(30 + nameBytes.length, 1, true);
    l.setUint16(32 + nameBytes.length, 16, true);
    l.setBigUint64(34 + nameBytes.length, BigInt(data.length), true);
    l.setBigUint64(42 + nameBytes.length, BigInt(data.length), true);
    const record = new Uint8Array(46 + nameBytes.length + 28);
    const c = dv(record);
    c.setUint32(0, 0x02014b50, true);
    c.setUint16(4, 0x032d, true);
    c.setUint16(6, 45, true);
    c.setUint16(8, 0x0800, true);
    c.setUint16(12, 0x2000, true);
    c.setUint16(14, 0x5821, true);
    c.setUint32(16, crc32(data), true);
    c.setUint32(20, 0xffffffff, true);
    c.setUint32(24, 0xffffffff, true);
    c.setUint16(28, nameBytes.length, true);
    c.setUint16(30, 28, true);
    c.setUint32(42, 0xffffffff, true);
    record.set(nameBytes, 46);
    const x = 46 + nameBytes.length;
    c.setUint16(x, 1, true);
    c.setUint16(x + 2, 24, true);
    c.setBigUint64(x + 4, BigInt(data.length), true);
    c.setBigUint64(x + 12, BigInt(data.length), true);
    c.setBigUint64(x + 20, BigInt(at), true);
    central.push(record);
    push(local);
    push(data);
  }
  const cdOffset = at;
  for (const record of central) push(record);
  const cdSize = at - cdOffset;
  const eocd64At = at;
  const tail = new Uint8Array(56 + 20 + 22);
  const t = dv(tail);
  t.setUint32(0, 0x06064b50, true);
  t.setBigUint64(4, 44n, true);
  t.setUint16(12, 0x032d, true);
  t.setUint16(14, 45, true);
  t.setBigUint64(24, BigInt(files.length), true);
  t.setBigUint64(32, BigInt(files.length), true);
  t.setBigUint64(40, BigInt(cdSize), true);
  t.setBigUint64(48, BigInt(cdOffset), true);
  t.setUint32(56, 0x07064b50, true);
  t.setBigUint64(64, BigInt(eocd64At), true);
  t.setUint32(72, 1, true);
  t.setUint32(76, 0x06054b50, true);
  t.setUint16(84, options.endValues ? files.length : 0xffff, true);
  t.setUint16(86, options.endValues ? files.length : 0xffff, true);
  t.setUint32(88, options.endValues ? cdSize : 0xffffffff, true);
  t.setUint32(92, options.endValues ? cdOffset : 0xffffffff, true);
  push(tail);
  const bytes = new Uint8Array(at);
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return { bytes, cdOffset, eocd64At };
}

describe('ZIP64', () => {
  const files = [
    { name: 'a.bin', data: pattern(70_000, 3) },
    { name: 'b.bin', data: pattern(9, 4) },
  ];

  it('sizes, offsets and counts come from the ZIP64 fields; the data is read past the local ZIP64 extra', async () => {
    for (const endValues of [false, true]) {
      const { bytes, cdOffset } = zip64Of(files, { endValues });
      const file = source(bytes);
      const entries = await listZipEntries(file);
      expect(entries.map((e) => [e.name, e.size, e.compressedSize, e.offset])).toEqual([
        ['a.bin', 70_000, 70_000, 0],
        ['b.bin', 9, 9, 30 + 5 + 20 + 70_000],
      ]);
      expect(entries[0]!.centralDirectoryOffset).toBe(cdOffset);
      for (const [i, entry] of entries.entries()) {
        expectSameBytes(await readAll(zipEntryStream(file, entry)), files[i]!.data);
      }
    }
  });

  it('end records that disagree, a locator pointing nowhere, a missing ZIP64 value', async () => {
    const { bytes, eocd64At } = zip64Of(files, { endValues: true });
    const end = bytes.length - 22;
    const damaged = [
      patched(bytes, (v) => v.setUint16(end + 10, 1, true)), // 1 entry here, 2 in the ZIP64 record
      patched(bytes, (v) => v.setUint32(end + 16, 5, true)), // another directory offset
      patched(bytes, (v) => v.setBigUint64(end - 20 + 8, BigInt(bytes.length), true)),
      patched(bytes, (v) => v.setBigUint64(end - 20 + 8, 2n ** 63n, true)),
      patched(bytes, (v) => v.setUint32(eocd64At, 0, true)),
      patched(bytes, (v) => v.setBigUint64(eocd64At + 4, 2n ** 40n, true)),
      patched(bytes, (v) => v.setBigUint64(eocd64At + 48, 2n ** 62n, true)),
      // The first record's ZIP64 extra says it holds only the two sizes: its offset has no value.
      patched(bytes, (v) => v.setUint16(Number(v.getBigUint64(eocd64At + 48, true)) + 46 + 5 + 2, 16, true)),
    ];
    for (const bundle of damaged) await failure(() => listZipEntries(source(bundle)));
  });
});

describe('damage: typed refusals, never a hang, a crash or a stream that closes on wrong bytes', () => {
  let bundle: Uint8Array;
  let where: ReturnType<typeof layout>;
  beforeAll(async () => {
    bundle = await zipOf(three);
    where = layout(bundle);
  });
  const list = (bytes: Uint8Array, options = {}) => listZipEntries(source(bytes), options);

  it('a truncated end record', async () => {
    for (const cut of [1, 5, 21, 22, 23]) {
      const error = await failure(() => list(bundle.subarray(0, bundle.length - cut)));
      expect(error.message).toMatch(/end of central directory|runs past|no central directory record/);
    }
  });

  it('a directory offset or size out of range', async () => {
    const { end } = where;
    for (const patch of [
      (v: DataView) => v.setUint32(end + 16, bundle.length, true),
      (v: DataView) => v.setUint32(end + 16, 0xffffffff, true),
      (v: DataView) => v.setUint32(end + 12, where.cdSize + 1, true),
      (v: DataView) => v.setUint32(end + 12, 0xffffffff, true),
      (v: DataView) => v.setUint32(end + 16, where.cd + 1, true),
    ]) {
      await failure(() => list(patched(bundle, patch)));
    }
  });

  it('caps: entry count and directory size, checked before the directory is read', async () => {
    const { end } = where;
    const huge = patched(bundle, (v) => {
      v.setUint16(end + 8, 0xfffe, true);
      v.setUint16(end + 10, 0xfffe, true);
    });
    expect((await failure(() => list(huge))).message).toMatch(/over the limit of 10000/);
    const crowded = patched(bundle, (v) => {
      v.setUint16(end + 8, 500, true);
      v.setUint16(end + 10, 500, true);
    });
    expect((await failure(() => list(crowded))).message).toMatch(/cannot fit/);
    await failure(() => list(bundle, { maxEntries: 2 }));
    const file = source(await zipOf(Array.from({ length: 2000 }, (_, i) => ({ name: `f${i}`, input: pattern(2) }))));
    await failure(() => listZipEntries(file, { maxCentralDirectoryBytes: 50_000 }));
    expect(file.reads, 'only the tail was read').toHaveLength(1);
    await failure(() => list(bundle, { maxEntries: 0 }), ClientErrorCode.INVALID_INPUT);
  });

  it('a record whose name runs past the directory, and bytes after the last record', async () => {
    const { cd, end } = where;
    await failure(() => list(patched(bundle, (v) => v.setUint16(cd + 28, 0xffff, true))));
    const afterLast = patched(bundle, (v) => {
      v.setUint16(end + 8, 2, true);
      v.setUint16(end + 10, 2, true);
    });
    expect((await failure(() => list(afterLast))).message).toMatch(/bytes after its 2 records/);
    await failure(() => list(patched(bundle, (v) => v.setUint32(cd, 0x02014b51, true))));
  });

  it('an entry pointing into the directory, listed or found so by its local header', async () => {
    const { cd } = where;
    // Record 2 (the empty entry): its local header moved to just before the directory.
    const secondRecord = cd + 46 + 'one.txt'.length;
    const thirdRecord = secondRecord + 46 + 'two.bin'.length;
    await failure(() => list(patched(bundle, (v) => v.setUint32(secondRecord + 42, cd - 10, true))));
    await failure(() => list(patched(bundle, (v) => v.setUint32(thirdRecord + 42, cd, true))));

    // A local header whose extra length pushes the data into the directory is caught when read.
    const entries = await list(bundle);
    const two = entries[1]!;
    const pushed = patched(bundle, (v) => v.setUint16(two.offset + 28, 0xffff, true));
    const file = source(pushed);
    const error = await failure(() => readAll(zipEntryStream(file, two)));
    expect(error.message).toMatch(/runs into the central directory/);
    expect(file.reads, 'no data was read').toEqual([[two.offset, two.offset + 30]]);
    await failure(() => readAll(zipEntryStream(source(patched(bundle, (v) => v.setUint32(two.offset, 0, true))), two)));
  });

  it('a CRC mismatch errors the stream after the good pieces, instead of closing it', async () => {
    const data = pattern(2.5 * MIB);
    const big = await zipOf([{ name: 'big', input: data }]);
    const [entry] = await list(big);
    const flipped = patched(big, (_, copy) => {
      copy[30 + 3 + data.length - 1]! ^= 1;
    });
    const reader = zipEntryStream(source(flipped), entry!).getReader();
    let delivered = 0;
    const error = await failure(async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        delivered += value.length;
      }
    });
    expect(error.message).toMatch(/CRC-32/);
    expect(delivered, 'the good pieces arrived, the damaged last one did not').toBe(2 * MIB);

    // A directory that lies about the CRC fails the same way for a one-piece entry.
    const lying = { ...(await list(bundle))[0]!, crc32: 1 };
    await failure(() => readAll(zipEntryStream(source(bundle), lying)));
  });

  it('compressed or encrypted entries are listed as unsupported and refused before any read', async () => {
    const { cd } = where;
    const deflated = patched(bundle, (v) => v.setUint16(cd + 10, 8, true));
    const encrypted = patched(bundle, (v) => v.setUint16(cd + 8, v.getUint16(cd + 8, true) | 1, true));
    for (const bytes of [deflated, encrypted]) {
      const file = source(bytes);
      const [entry] = await listZipEntries(file);
      expect(entry!.supported).toBe(false);
      file.reads.length = 0;
      await failure(() => Promise.resolve().then(() => zipEntryStream(file, entry!)));
      expect(file.reads).toEqual([]);
    }
    // The directory says stored, the local header says deflated: refused before any data.
    const [first] = await list(bundle);
    const local = patched(bundle, (v) => v.setUint16(8, 8, true));
    await failure(() => readAll(zipEntryStream(source(local), first!)));
    await failure(
      () => Promise.resolve().then(() => zipEntryStream(source(bundle), { offset: -1 } as ZipEntry)),
      ClientErrorCode.INVALID_INPUT,
    );
    const nameless = { ...first!, path: undefined as unknown as string, supported: false };
    await failure(() => Promise.resolve().then(() => zipEntryStream(source(bundle), nameless)));
  });

  it('a source that answers the wrong length, or never answers: BUNDLE_INVALID, ABORTED', async () => {
    const short: ZipReadable = { size: bundle.length, read: (o, l) => Promise.resolve(bundle.slice(o, o + l - 1)) };
    await failure(() => listZipEntries(short));

    const never: ZipReadable = { size: bundle.length, read: () => new Promise(() => {}) };
    await failure(() => listZipEntries(never, { signal: AbortSignal.timeout(20) }), ClientErrorCode.ABORTED);
    await failure(() => listZipEntries(never, { signal: AbortSignal.abort() }), ClientErrorCode.ABORTED);

    const [entry] = await list(bundle);
    const stream = zipEntryStream(never, entry!, { signal: AbortSignal.timeout(20) });
    await failure(() => readAll(stream), ClientErrorCode.ABORTED);
  });

  it('cancelling an entry stream aborts the read in flight', async () => {
    const [entry] = await list(bundle);
    let seen: AbortSignal | undefined;
    const hanging: ZipReadable = {
      size: bundle.length,
      read: (o, l, signal) => {
        if (o === entry!.offset) return Promise.resolve(bundle.slice(o, o + l));
        seen = signal;
        return new Promise(() => {});
      },
    };
    const reader = zipEntryStream(hanging, entry!).getReader();
    const pending = reader.read();
    await new Promise((resolve) => setTimeout(resolve, 10));
    await reader.cancel('no longer wanted');
    expect(seen?.aborted).toBe(true);
    expect(await pending).toEqual({ done: true, value: undefined });
  });

  /**
   * Edits one to three bytes of `bundle` (in its entries' bytes, in its directory and end records
   * from `structural` on, or anywhere) and, now and then, cuts up to 8 from its end: the listing
   * succeeds or is refused typed, and an entry then reads whole with its CRC-32 or errors typed.
   * Returns how often each happened, so a run that only ever refuses is seen.
   */
  async function survivesDamage(bundle: Uint8Array, structural: number) {
    const seen = { listed: 0, refused: 0, read: 0, readRefused: 0 };
    const typed = (error: unknown) => error instanceof ClientError && error.code === ClientErrorCode.BUNDLE_INVALID;
    const mutation = fc.record({
      // Unbiased: fast-check's default leans to the ends of a range, and the fields are in the middle.
      at: fc.noBias(
        fc.oneof(
          fc.nat({ max: structural - 1 }),
          fc.integer({ min: structural, max: bundle.length - 1 }),
          fc.nat({ max: bundle.length - 1 }),
        ),
      ),
      value: fc.integer({ min: 0, max: 255 }),
    });
    const cuts = fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, { arbitrary: fc.nat({ max: 8 }), weight: 1 });
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), cuts, async (edits, cut) => {
        const bytes = bundle.slice(0, bundle.length - cut);
        for (const { at, value } of edits) if (at < bytes.length) bytes[at] = value;
        let entries: ZipEntry[];
        try {
          entries = await listZipEntries(source(bytes));
          seen.listed++;
        } catch (error) {
          if (!typed(error)) throw error;
          seen.refused++;
          return;
        }
        for (const entry of entries) {
          if (!entry.supported) continue;
          try {
            const read = await readAll(zipEntryStream(source(bytes), entry));
            expect(read.length).toBe(entry.size);
            expect(crc32(read)).toBe(entry.crc32);
            seen.read++;
          } catch (error) {
            if (!typed(error)) throw error;
            seen.readRefused++;
          }
        }
      }),
      { numRuns: 300 },
    );
    return seen;
  }

  /** Every byte from `structural` on set to each of a few values: the listing and each read end well or typed. */
  async function survivesEveryByte(bundle: Uint8Array, structural: number) {
    for (let at = structural; at < bundle.length; at++) {
      for (const value of [0x00, 0xff, 0x80, bundle[at]! ^ 1, (bundle[at]! + 0x40) & 0xff]) {
        const bytes = bundle.slice();
        bytes[at] = value;
        const listed = await listZipEntries(source(bytes)).catch((error: unknown) => error);
        if (!Array.isArray(listed)) {
          expect(listed, `byte ${at} set to ${value}`).toBeInstanceOf(ClientError);
          expect((listed as ClientError).code).toBe(ClientErrorCode.BUNDLE_INVALID);
          continue;
        }
        for (const entry of listed as ZipEntry[]) {
          if (!entry.supported) continue;
          const read = await readAll(zipEntryStream(source(bytes), entry)).catch((error: unknown) => error);
          if (read instanceof Uint8Array) expect(crc32(read), `byte ${at} set to ${value}`).toBe(entry.crc32);
          else expect(read, `byte ${at} set to ${value}`).toMatchObject({ code: ClientErrorCode.BUNDLE_INVALID });
        }
      }
    }
  }

  it('every byte of the directory and end records damaged in turn', async () => {
    const small = await zipOf([
      { name: 'a', input: pattern(40, 1) },
      { name: 'dir/b.txt', input: pattern(70, 2) },
    ]);
    await survivesEveryByte(small, layout(small).cd);
    const wide = zip64Of([
      { name: 'a', data: pattern(40, 1) },
      { name: 'dir/b.txt', data: pattern(70, 2) },
    ]);
    await survivesEveryByte(wide.bytes, wide.cdOffset);
  });

  it('random damage to a bundle: always listed or refused typed, and an entry is whole or errors', async () => {
    const small = await zipOf([
      { name: 'a', input: pattern(40, 1) },
      { name: 'dir/b.txt', input: pattern(70, 2) },
      { name: 'c', input: new Uint8Array(0) },
    ]);
    const fromClientZip = await survivesDamage(small, layout(small).cd);
    const wide = zip64Of([
      { name: 'a', data: pattern(40, 1) },
      { name: 'dir/b.txt', data: pattern(70, 2) },
    ]);
    const fromZip64 = await survivesDamage(wide.bytes, wide.cdOffset);
    for (const seen of [fromClientZip, fromZip64]) {
      expect(Math.min(seen.listed, seen.refused, seen.read, seen.readRefused), JSON.stringify(seen)).toBeGreaterThan(0);
    }
  });
});

describe('over a sealed file: openRandomAccess on the storage stand-in, over loopback HTTP', () => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const alice = { ts: 1_700_000_000, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.org' }] };
  const options: SealOptions = {
    policy: { alice },
    pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice },
  };
  let storage: RunningStorage;
  beforeAll(async () => {
    storage = await startStorage();
  });
  afterAll(() => storage.close());

  it('lists a sealed 3-file bundle and saves the second file alone, with its bytes authenticated', async () => {
    const files = [
      { name: 'photo.jpg', input: pattern(600_000, 5) },
      { name: 'report.pdf', input: pattern(900_000, 6) },
      { name: 'notes.txt', input: pattern(1000, 7) },
    ];
    const plain = await zipOf(files);
    const out = collector();
    await sealStream(kem.mpk, options, new Response(plain).body!, out.writable);
    await writeFile(join(storage.dataDir, 'bundle'), out.bytes());

    const requests: string[] = [];
    const countingFetch: typeof fetch = (input, init) => {
      requests.push(new Headers(init?.headers).get('range') ?? 'whole');
      return fetch(input, init);
    };
    const file = await openRandomAccess(
      { url: `${storage.url}/filedownload/bundle`, fetch: countingFetch },
      { vk: ibs.vk, recipientId: 'alice', usk: extractUsk(kem.msk, alice) },
    );
    const zip = zipFromRandomAccess(file);
    expect(zip.size).toBe(plain.length);
    const entries = await listZipEntries(zip);
    expect(entries.map((e) => e.name)).toEqual(['photo.jpg', 'report.pdf', 'notes.txt']);
    const before = requests.length;
    expectSameBytes(await readAll(zipEntryStream(zip, entries[1]!)), files[1]!.input);
    // 900 000 bytes in 256 KiB segments: a handful of ranged requests, never the whole file.
    expect(requests.length - before).toBeGreaterThan(0);
    expect(requests.length - before).toBeLessThanOrEqual(4);
    expect(requests).not.toContain('whole');
  });
});

describe("bundles made by pg-js's ZIP writer (@transcend-io/conflux)", () => {
  it('lists and reads them: stored entries with data descriptors, as client-zip writes', async () => {
    // conflux checks for BigInt on `self` when it loads, which Node has only as globalThis.
    (globalThis as { self?: unknown }).self ??= globalThis;
    const { Writer } = await import('@transcend-io/conflux');
    const files = [
      { name: 'dir/a.txt', data: pattern(300_000, 8) },
      { name: 'b.bin', data: pattern(5, 9) },
    ];
    const zip = new Writer();
    const written = new Response(zip.readable).arrayBuffer();
    const writer = zip.writable.getWriter();
    for (const { name, data } of files) {
      await writer.write({ name, lastModified: WHEN.getTime(), stream: () => new Response(data).body! });
    }
    await writer.close();
    const file = source(new Uint8Array(await written));
    const entries = await listZipEntries(file);
    expect(entries.map((e) => [e.name, e.path, e.size, e.supported])).toEqual([
      ['a.txt', 'dir/a.txt', 300_000, true],
      ['b.bin', 'b.bin', 5, true],
    ]);
    for (const [i, entry] of entries.entries()) {
      expectSameBytes(await readAll(zipEntryStream(file, entry)), files[i]!.data, entry.path);
    }
  });
});

describe('findEndRecord', () => {
  it('takes the record nearest the end whose comment reaches the end', () => {
    const tail = new Uint8Array(100);
    const v = dv(tail);
    v.setUint32(10, 0x06054b50, true);
    v.setUint16(30, 100 - 32, true); // reaches the end
    v.setUint32(50, 0x06054b50, true);
    v.setUint16(70, 3, true); // does not
    expect(findEndRecord(tail)).toBe(10);
    v.setUint16(70, 100 - 72, true);
    expect(findEndRecord(tail)).toBe(50);
    expect(findEndRecord(new Uint8Array(21))).toBe(-1);
  });
});

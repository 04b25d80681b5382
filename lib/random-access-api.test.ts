import fc from 'fast-check';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, open, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { inlineSegmentHasher } from './crypto/segment-hasher.js';
import { InputError } from './errors.js';
import { splitFrame } from './frame.js';
import { StreamUnsealer, prepareSeal, prepareUserSecretKey, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { pumpSegments } from './pump.js';
import {
  openRandomAccess,
  rangedUrlSource,
  type ByteSource,
  type FileHandleLike,
  type RandomAccessFile,
} from './random-access.js';
import { segmentLayout, wireSpan, rangePieces, type SegmentLayout } from './segment-map.js';
import { SegmentSealer } from './segments.js';
import { SENDER_WORDING, claimedSenderReport } from './sender.js';

/**
 * Random access as public API (lib/random-access.ts): any span of a streaming ciphertext, from a
 * Blob, a file handle, a ranged URL or any { size, read }, equals the same span of a full decrypt,
 * and costs only the segments that hold it (plus the framing, segment 0 and the final segment).
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const alice = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.org' }] };
const bob = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const usk = extractUsk(kem.msk, alice);
/** Prepared once: each open then decapsulates without decoding the key again. */
const prepared = prepareUserSecretKey(usk);
const keys = { vk: ibs.vk, recipientId: 'alice', usk: prepared };
const options: SealOptions = {
  policy: { alice },
  pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob },
};

/** Small segments make multi-segment files quickly (sealStream always uses 256 KiB). */
const S = 512;

/** A streaming ciphertext in segments of `segmentSize`, sealed as sealStream does. */
async function sealSegments(plain: Uint8Array, segmentSize = S): Promise<Uint8Array<ArrayBuffer>> {
  const mode = { type: 'Streaming', segmentSize, sizeHint: [0n, undefined] } as const;
  const ctx = await prepareSeal(kem.mpk, options, mode);
  const out = collector();
  const sealer = new SegmentSealer({ ...ctx, hasher: inlineSegmentHasher(ctx.transcript) }, segmentSize);
  await pumpSegments(chunkedSource(plain, 700).getReader(), out.writable.getWriter(), ctx.frame, sealer);
  return new Uint8Array(out.bytes());
}

async function fullDecrypt(ciphertext: Uint8Array): Promise<Uint8Array> {
  const unsealer = await StreamUnsealer.new(chunkedSource(ciphertext), ibs.vk);
  const out = collector();
  await unsealer.unseal('alice', prepared, out.writable);
  return out.bytes();
}

const plaintext = (n: number, seed = 1) =>
  Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7 + (i >> 8)) & 255);

const layoutOf = (ciphertext: Uint8Array, segmentSize = S): SegmentLayout =>
  segmentLayout(ciphertext.length, splitFrame(ciphertext).framingBytes, segmentSize)!;

/** The reads a source saw, as [offset, end) pairs. */
type Reads = [number, number][];
const bytesOf = (reads: Reads) => reads.reduce((n, [a, b]) => n + b - a, 0);

/** A Blob that records the spans read from it. */
class CountingBlob extends Blob {
  constructor(
    bytes: Uint8Array<ArrayBuffer>,
    readonly reads: Reads = [],
  ) {
    super([bytes]);
  }
  override slice(start?: number, end?: number, type?: string): Blob {
    this.reads.push([start ?? 0, end ?? this.size]);
    return super.slice(start, end, type);
  }
}

/** The ciphertext bytes a reader may read for the plaintext spans asked: framing, segment 0, final, covered segments. */
function allowed(layout: SegmentLayout, prefix: number, spans: [number, number][]): [number, number][] {
  const segments = new Set([0, layout.count - 1]);
  for (const [a, b] of spans)
    if (b > a) for (const { index } of rangePieces(layout, prefix, a, b - 1)) segments.add(index);
  const out: [number, number][] = [[0, layout.framingBytes]];
  for (const index of segments) {
    const { offset, length } = wireSpan(layout, index);
    out.push([offset, offset + length]);
  }
  return out;
}
const within = (reads: Reads, spans: [number, number][]) =>
  reads.every(([a, b]) => {
    // Each read is covered by the union of allowed spans.
    let at = a;
    for (const [x, y] of [...spans].sort((p, q) => p[0] - q[0])) if (x <= at && y > at) at = y;
    return at >= b;
  });

/** The prefix length (segment 0's signer block) of a file: region 0 minus the message bytes it holds. */
const prefixOf = (layout: SegmentLayout, plainBytes: number) =>
  (layout.count - 1) * layout.segmentSize + layout.finalRegionBytes - plainBytes;

// --- a real HTTP server on 127.0.0.1 answering Range requests ---

type Mode =
  'ranged' | 'plain' | 'no-content-range' | 'gzip' | 'stall' | 'stall-body' | 'stall-later' | 'changes' | CrossOrigin;
/**
 * What a cross-origin page sees of a host that exposes no header (Cryptify: only `cryptifytoken`):
 * no Content-Range, only the status and Content-Length. `no-content-range` answers HEAD; the
 * others refuse it (405), and `cross-no-length` answers a plain GET without Content-Length,
 * `cross-head-lies` with a size one kilobyte too large, `cross-changes` later ranges one byte short.
 */
type CrossOrigin = 'cross-no-head' | 'cross-no-length' | 'cross-head-lies' | 'cross-changes';
const crossOrigin = (mode: Mode) => mode === 'no-content-range' || mode.startsWith('cross-');
const files = new Map<string, { bytes: Uint8Array; mode: Mode; reads: Reads }>();
let server: Server;
let base = '';
let tmp = '';

function serve(name: string, bytes: Uint8Array, mode: Mode = 'ranged') {
  const entry = { bytes, mode, reads: [] as Reads };
  files.set(name, entry);
  return { url: `${base}/${name}`, reads: entry.reads };
}

function handle(req: IncomingMessage, res: ServerResponse) {
  const file = files.get((req.url ?? '').slice(1));
  if (file === undefined) return res.writeHead(404).end();
  const { bytes, mode, reads } = file;
  const match = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  if (req.method === 'HEAD' && mode.startsWith('cross-')) return res.writeHead(405).end();
  if (mode === 'cross-no-length' && match === null) return res.writeHead(200).end(bytes);
  const lie = mode === 'cross-head-lies' ? 1024 : 0;
  if (mode === 'plain' || match === null)
    return res.writeHead(200, { 'content-length': bytes.length + lie }).end(bytes);
  const start = Number(match[1]);
  if (start >= bytes.length) return res.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
  const end = Math.min(Number(match[2]), bytes.length - 1);
  // stall-later answers the probe and the final segment, then never answers again.
  if (mode === 'stall' || (mode === 'stall-later' && start > 0 && end < bytes.length - 1)) return;
  const total = mode === 'changes' && start > 0 ? bytes.length + 1 : bytes.length;
  const short = mode === 'cross-changes' && start > 0 ? 1 : 0;
  const headers: Record<string, string | number> = { 'content-length': end - start + 1 - short };
  if (!crossOrigin(mode)) headers['content-range'] = `bytes ${start}-${end}/${total}`;
  if (mode === 'gzip') headers['content-encoding'] = 'gzip';
  res.writeHead(206, headers);
  reads.push([start, end + 1]);
  if (mode === 'stall-body') return res.write(bytes.subarray(start, start + 10)); // then nothing
  res.end(bytes.subarray(start, end + 1 - short));
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  tmp = await mkdtemp(join(tmpdir(), 'pg-random-access-'));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(tmp, { recursive: true, force: true });
});

let fileCount = 0;
async function onDisk(bytes: Uint8Array): Promise<string> {
  const path = join(tmp, `ct-${fileCount++}`);
  await writeFile(path, bytes);
  return path;
}

describe('openRandomAccess', () => {
  it('property: any span from a Blob, a FileHandle and a ranged URL equals the full decrypt, reading only its segments', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 3 * S + 1 }),
        fc.array(fc.tuple(fc.nat(), fc.nat()), { minLength: 1, maxLength: 4 }),
        async (length, rawSpans) => {
          const plain = plaintext(length, length);
          const ciphertext = await sealSegments(plain);
          const full = await fullDecrypt(ciphertext);
          expect(Buffer.from(full).equals(Buffer.from(plain))).toBe(true);
          const spans = rawSpans.map(([x, y]): [number, number] => {
            const [a, b] = [x % (length + 1), y % (length + 1)];
            return a <= b ? [a, b] : [b, a];
          });
          const layout = layoutOf(ciphertext);
          const prefix = prefixOf(layout, length);

          const blob = new CountingBlob(ciphertext);
          const handle = await open(await onDisk(ciphertext));
          const handleReads: Reads = [];
          const counted: FileHandleLike = {
            read: (buffer, offset, size, position) => {
              handleReads.push([position, position + size]);
              return handle.read(buffer, offset, size, position);
            },
          };
          const { url, reads: urlReads } = serve(`prop-${length}`, ciphertext);
          const cross = serve(`prop-cross-${length}`, ciphertext, 'no-content-range');
          const crossGet = serve(`prop-cross-get-${length}`, ciphertext, 'cross-no-head');
          try {
            const readers: [string, RandomAccessFile, Reads, [number, number][]][] = [
              ['blob', await openRandomAccess(blob, keys), blob.reads, []],
              [
                'file handle',
                await openRandomAccess({ fileHandle: counted, size: ciphertext.length }, keys),
                handleReads,
                [],
              ],
              ['bare file handle', await openRandomAccess(handle, keys), [], []],
              // A URL's first request asks for 64 KiB (the framing and segment 0 of most files).
              ['url', await openRandomAccess(url, keys), urlReads, [[0, 64 * 1024]]],
              // Cross-origin: only status and Content-Length are seen; the size from a HEAD or a GET.
              ['cross-origin url', await openRandomAccess(cross.url, keys), cross.reads, [[0, 64 * 1024]]],
              [
                'cross-origin url, no HEAD',
                await openRandomAccess(crossGet.url, keys),
                crossGet.reads,
                [[0, 64 * 1024]],
              ],
            ];
            // Opening reads the framing, segment 0 and the final segment, no more (a URL its 64 KiB probe).
            const openCost =
              layout.framingBytes +
              wireSpan(layout, 0).length +
              (layout.count > 1 ? wireSpan(layout, layout.count - 1).length : 0);
            expect(bytesOf(blob.reads)).toBe(openCost);
            expect(bytesOf(handleReads)).toBe(openCost);
            for (const [name, reader, reads, probe] of readers) {
              expect(reader.size, name).toBe(length);
              expect(reader.ciphertextSize).toBe(ciphertext.length);
              for (const [a, b] of spans) {
                const want = Buffer.from(full.subarray(a, b));
                expect(Buffer.from(await reader.slice(a, b)).equals(want), `${name} slice ${a}-${b}`).toBe(true);
                const pieces: Uint8Array[] = [];
                for await (const piece of reader.range(a, b)) pieces.push(piece);
                expect(pieces.length).toBeLessThanOrEqual(b - a === 0 ? 0 : Math.ceil((b - a) / S) + 1);
                expect(Buffer.concat(pieces).equals(want), `${name} range ${a}-${b}`).toBe(true);
                const streamed = new Uint8Array(await new Response(reader.stream(a, b)).arrayBuffer());
                expect(Buffer.from(streamed).equals(want)).toBe(true);
              }
              expect(
                within(reads, [...probe, ...allowed(layout, prefix, spans)]),
                `${name} read only covered segments`,
              ).toBe(true);
            }
            expect(Buffer.from(await readers[0]![1].slice(0)).equals(Buffer.from(full))).toBe(true);
          } finally {
            await handle.close();
          }
        },
      ),
      { numRuns: 10 },
    );
  });

  it('a URL source reads only the segments a span covers beyond its first 64 KiB', async () => {
    const plain = plaintext(300 * 1024, 5);
    const ciphertext = await sealSegments(plain, 1024);
    const layout = layoutOf(ciphertext, 1024);
    const { url, reads } = serve('big', ciphertext);
    const reader = await openRandomAccess({ url, headers: { 'x-test': '1' } }, keys);
    // The probe (64 KiB: the framing and segment 0) and the final segment.
    expect(reads).toEqual([
      [0, 64 * 1024],
      [wireSpan(layout, layout.count - 1).offset, ciphertext.length],
    ]);
    reads.length = 0;
    const [a, b] = [200_000, 203_000];
    expect(Buffer.from(await reader.slice(a, b)).equals(Buffer.from(plain.subarray(a, b)))).toBe(true);
    const prefix = prefixOf(layout, plain.length);
    const covered = [...rangePieces(layout, prefix, a, b - 1)].map((p) => wireSpan(layout, p.index));
    expect(reads).toEqual([[covered[0]!.offset, covered.at(-1)!.offset + covered.at(-1)!.length]]);
    expect(covered.length).toBe(4);
  });

  it('says what was proved: segments authenticated, the sender a claim (lib/sender.ts wording)', async () => {
    const reader = await openRandomAccess(new Blob([await sealSegments(plaintext(2000))]), keys);
    expect(reader.trust).toBe('segments-authenticated');
    expect(reader.sender).toMatchObject(bob);
    const report = reader.claimedSender();
    expect(report).toEqual(claimedSenderReport(reader.sender, 'range'));
    expect(report.standing).toBe('claimed');
    expect(report.lines[0]!.label).toBe(SENDER_WORDING.rangeClaimed);
  });

  it('a ZIP sealed whole: one entry read through its central directory, reading only that entry', async () => {
    const entries = [
      { name: 'a.txt', data: plaintext(20_000, 1) },
      { name: 'b.bin', data: plaintext(20_000, 2) },
      { name: 'c.txt', data: plaintext(20_000, 3) },
    ];
    const zip = storedZip(entries);
    const ciphertext = await sealSegments(zip, 1024);
    const blob = new CountingBlob(ciphertext);
    const reader = await openRandomAccess(blob, keys);
    expect(reader.size).toBe(zip.length);

    const eocd = view(await reader.slice(reader.size - 22));
    expect(eocd.getUint32(0, true)).toBe(0x06054b50);
    const [count, cdSize, cdOffset] = [eocd.getUint16(10, true), eocd.getUint32(12, true), eocd.getUint32(16, true)];
    const cd = await reader.slice(cdOffset, cdOffset + cdSize);
    const found = new Map<string, { offset: number; size: number; crc: number }>();
    for (let at = 0, i = 0; i < count; i++) {
      const d = view(cd, at);
      const nameLength = d.getUint16(28, true);
      const skip = 46 + nameLength + d.getUint16(30, true) + d.getUint16(32, true);
      const name = new TextDecoder().decode(cd.subarray(at + 46, at + 46 + nameLength));
      found.set(name, { crc: d.getUint32(16, true), size: d.getUint32(20, true), offset: d.getUint32(42, true) });
      at += skip;
    }
    const entry = found.get('b.bin')!;
    const local = view(await reader.slice(entry.offset, entry.offset + 30));
    expect(local.getUint32(0, true)).toBe(0x04034b50);
    const dataStart = entry.offset + 30 + local.getUint16(26, true) + local.getUint16(28, true);
    const data = await reader.slice(dataStart, dataStart + entry.size);
    expect(Buffer.from(data).equals(Buffer.from(entries[1]!.data))).toBe(true);
    expect(crc32(data)).toBe(entry.crc);

    // No segment wholly inside a.txt's or c.txt's data was read, and well under half the file was.
    const layout = layoutOf(ciphertext, 1024);
    const prefix = prefixOf(layout, zip.length);
    const others = [found.get('a.txt')!, found.get('c.txt')!].map((e) => [e.offset + 30 + 5, e.offset + 35 + e.size]);
    for (let index = 1; index < layout.count - 1; index++) {
      const [from, to] = [index * 1024 - prefix, (index + 1) * 1024 - prefix]; // its plaintext bytes
      if (!others.some(([a, b]) => a! <= from && to <= b!)) continue;
      const wire = wireSpan(layout, index);
      const touched = blob.reads.some(([a, b]) => a < wire.offset + wire.length && b > wire.offset);
      expect(touched, `segment ${index} (another entry) was read`).toBe(false);
    }
    expect(bytesOf(blob.reads)).toBeLessThan(ciphertext.length * 0.45);
  });
});

describe('openRandomAccess errors', () => {
  let ciphertext: Uint8Array<ArrayBuffer>;
  let plain: Uint8Array;
  beforeAll(async () => {
    plain = plaintext(5 * S);
    ciphertext = await sealSegments(plain);
  });

  it.each([
    ['a 200 answer to a Range request', 'plain'],
    ['a re-encoded answer (Content-Encoding)', 'gzip'],
  ] as const)(
    'a server that does not answer ranges: undefined from rangedUrlSource, SOURCE_FAILED from openRandomAccess (%s)',
    async (_, mode) => {
      const { url } = serve(`refuse-${mode}`, ciphertext, mode);
      expect(await rangedUrlSource(url)).toBeUndefined();
      await expect(openRandomAccess(url, keys)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    },
  );

  it('cross-origin (no Content-Range readable): the size from a plain request, refused without one, SOURCE_FAILED when an answer is not the span asked for', async () => {
    const big = await sealSegments(plaintext(100 * 1024, 3), 1024);
    const plainBig = await fullDecrypt(big);
    const ok = serve('cross-ok', big, 'no-content-range');
    const reader = await openRandomAccess(ok.url, keys);
    expect(Buffer.from(await reader.slice(70_000, 90_000)).equals(Buffer.from(plainBig.subarray(70_000, 90_000)))).toBe(
      true,
    );

    const none = serve('cross-none', ciphertext, 'cross-no-length');
    expect(await rangedUrlSource(none.url)).toBeUndefined();
    await expect(openRandomAccess(none.url, keys)).rejects.toMatchObject({
      code: 'SOURCE_FAILED',
      message: expect.stringContaining('file size'),
    });
    // A size that does not fit the first answer (a file smaller than the 64 KiB asked for).
    const lies = serve('cross-lies', ciphertext, 'cross-head-lies');
    await expect(openRandomAccess(lies.url, keys)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    // Opening reads the final segment: answered one byte short of what was asked.
    const changes = serve('cross-changes', big, 'cross-changes');
    await expect(openRandomAccess(changes.url, keys)).rejects.toMatchObject({
      code: 'SOURCE_FAILED',
      message: expect.stringContaining('the file changed'),
    });
  });

  it('a stalled server fails with SOURCE_FAILED after the stall timeout: no answer, a body that stops, a later range', async () => {
    for (const mode of ['stall', 'stall-body'] as const) {
      const { url } = serve(`stall-${mode}`, ciphertext, mode);
      const started = Date.now();
      await expect(openRandomAccess(url, { ...keys, stallMs: 200 })).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
      expect(Date.now() - started).toBeLessThan(5000);
    }
    // Opens (the probe and the final segment answered), then a range past the probe's 64 KiB stalls.
    const big = await sealSegments(plaintext(100 * 1024), 1024);
    const { url } = serve('stall-later', big, 'stall-later');
    const reader = await openRandomAccess(url, { ...keys, stallMs: 200 });
    await expect(reader.slice(90_000, 90_010)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    expect(Buffer.from(await reader.slice(10, 20)).equals(Buffer.from(plaintext(100 * 1024).subarray(10, 20)))).toBe(
      true,
    );
  });

  it('a stall timeout bounds every source; a signal cancels (CANCELLED)', async () => {
    const hanging: ByteSource = { size: ciphertext.length, read: () => new Promise(() => undefined) };
    await expect(openRandomAccess(hanging, { ...keys, stallMs: 100 })).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    const controller = new AbortController();
    const opening = openRandomAccess(hanging, { ...keys, signal: controller.signal });
    controller.abort(new Error('user left'));
    await expect(opening).rejects.toMatchObject({ code: 'CANCELLED' });

    // A span's own signal ends that read only.
    let hang = false;
    const sometimes: ByteSource = {
      size: ciphertext.length,
      read: (offset, length) =>
        hang ? new Promise(() => undefined) : Promise.resolve(ciphertext.slice(offset, offset + length)),
    };
    const reader = await openRandomAccess(sometimes, keys);
    hang = true;
    const span = new AbortController();
    const reading = reader.slice(S, 2 * S, { signal: span.signal });
    span.abort();
    await expect(reading).rejects.toMatchObject({ code: 'CANCELLED' });
    hang = false;
    expect(Buffer.from(await reader.slice(S, 2 * S)).equals(Buffer.from(plain.subarray(S, 2 * S)))).toBe(true);
  });

  it('a tampered segment fails the spans that cover it (TAMPERED), not the others', async () => {
    const layout = layoutOf(ciphertext);
    const bad = ciphertext.slice();
    bad[wireSpan(layout, 2).offset + 5]! ^= 1;
    const reader = await openRandomAccess(new Blob([bad]), keys);
    const prefix = prefixOf(layout, plain.length);
    const inTwo = 2 * S - prefix + 10;
    await expect(reader.slice(inTwo, inTwo + 1)).rejects.toMatchObject({ code: 'TAMPERED' });
    await expect(reader.slice(0)).rejects.toMatchObject({ code: 'TAMPERED' });
    expect(Buffer.from(await reader.slice(0, S - prefix)).equals(Buffer.from(plain.subarray(0, S - prefix)))).toBe(
      true,
    );
    // Segment 0 or the final segment damaged: the file does not open.
    for (const index of [0, layout.count - 1]) {
      const broken = ciphertext.slice();
      broken[wireSpan(layout, index).offset]! ^= 1;
      await expect(openRandomAccess(new Blob([broken]), keys)).rejects.toMatchObject({ code: 'TAMPERED' });
    }
  });

  it('a span outside the plaintext is INVALID_INPUT (an InputError)', async () => {
    const reader = await openRandomAccess(new Blob([ciphertext]), keys);
    for (const [a, b] of [
      [0, plain.length + 1],
      [plain.length + 1, undefined],
      [-1, 3],
      [5, 4],
      [1.5, 3],
    ] as [number, number | undefined][]) {
      const error = await reader.slice(a, b).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InputError);
      expect(error).toMatchObject({ code: 'INVALID_INPUT' });
      await expect(reader.range(a, b).next()).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    }
    expect(() => reader.stream(0, plain.length + 1)).toThrow(InputError);
    expect(await reader.slice(plain.length)).toEqual(new Uint8Array(0));
  });

  it('a file cut (at a segment boundary, or inside the framing) is TRUNCATED', async () => {
    const layout = layoutOf(ciphertext);
    const atBoundary = ciphertext.subarray(0, wireSpan(layout, layout.count - 1).offset);
    await expect(openRandomAccess(new Blob([atBoundary]), keys)).rejects.toMatchObject({ code: 'TRUNCATED' });
    const { url } = serve('cut', atBoundary);
    await expect(openRandomAccess(url, keys)).rejects.toMatchObject({ code: 'TRUNCATED' });
    await expect(openRandomAccess(new Blob([ciphertext.subarray(0, 40)]), keys)).rejects.toMatchObject({
      code: 'TRUNCATED',
    });
  });

  it('a source that changed size is SOURCE_FAILED: a URL with another total, a file cut after opening, a short read', async () => {
    const big = await sealSegments(plaintext(100 * 1024), 1024);
    const { url } = serve('changes', big, 'changes');
    await expect(openRandomAccess(url, keys)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });

    const path = await onDisk(ciphertext);
    const handle = await open(path);
    try {
      const reader = await openRandomAccess({ fileHandle: handle }, keys);
      await truncate(path, wireSpan(layoutOf(ciphertext), 2).offset);
      await expect(reader.slice(3 * S, 3 * S + 1)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    } finally {
      await handle.close();
    }

    let short = false;
    const source: ByteSource = {
      size: ciphertext.length,
      read: async (offset, length) => ciphertext.slice(offset, offset + length - (short ? 1 : 0)),
    };
    const reader = await openRandomAccess(source, keys);
    short = true;
    await expect(reader.slice(2 * S, 2 * S + 1)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    const failing: ByteSource = { size: ciphertext.length, read: () => Promise.reject(new Error('disk on fire')) };
    await expect(openRandomAccess(failing, keys)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
  });

  it('refuses what is not a source, and keys that do not open the file', async () => {
    for (const bad of [42, null, { size: 3 }, { read: () => undefined }, { size: -1, read: () => undefined }])
      await expect(openRandomAccess(bad as never, keys)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(openRandomAccess(new Blob([ciphertext]), { ...keys, recipientId: 'mallory' })).rejects.toMatchObject({
      code: 'UNKNOWN_RECIPIENT',
    });
  });
});

// --- a stored (uncompressed) ZIP, written by hand ---

const view = (bytes: Uint8Array, at = 0) => new DataView(bytes.buffer, bytes.byteOffset + at);

function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function storedZip(entries: { name: string; data: Uint8Array }[]): Uint8Array {
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const { name, data } of entries) {
    const nameBytes = new TextEncoder().encode(name);
    const crc = crc32(data);
    const local = new Uint8Array(30 + nameBytes.length);
    const l = view(local);
    l.setUint32(0, 0x04034b50, true);
    l.setUint16(4, 20, true);
    l.setUint32(14, crc, true);
    l.setUint32(18, data.length, true);
    l.setUint32(22, data.length, true);
    l.setUint16(26, nameBytes.length, true);
    local.set(nameBytes, 30);
    const entry = new Uint8Array(46 + nameBytes.length);
    const c = view(entry);
    c.setUint32(0, 0x02014b50, true);
    c.setUint16(4, 20, true);
    c.setUint16(6, 20, true);
    c.setUint32(16, crc, true);
    c.setUint32(20, data.length, true);
    c.setUint32(24, data.length, true);
    c.setUint16(28, nameBytes.length, true);
    c.setUint32(42, offset, true);
    entry.set(nameBytes, 46);
    parts.push(local, data);
    central.push(entry);
    offset += local.length + data.length;
  }
  const cdSize = central.reduce((n, e) => n + e.length, 0);
  const eocd = new Uint8Array(22);
  const e = view(eocd);
  e.setUint32(0, 0x06054b50, true);
  e.setUint16(8, entries.length, true);
  e.setUint16(10, entries.length, true);
  e.setUint32(12, cdSize, true);
  e.setUint32(16, offset, true);
  return new Uint8Array(Buffer.concat([...parts, ...central, eocd]));
}

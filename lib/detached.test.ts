import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, concat, readAll } from '../test/streams.js';
import {
  attachHeader,
  detachHeader,
  inspectCiphertext,
  splitHeaderStream,
  type CiphertextInspection,
  type CiphertextSource,
} from './detached.js';
import { MAX_HEADER_BYTES, MAX_SIGNATURE_BYTES, splitFrame } from './frame.js';
import { SENDER_WORDING, StreamUnsealer, Unsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { blobSource } from './random-access.js';

/**
 * The framing on its own (lib/detached.ts): inspection from the first bytes only, and a header
 * stored apart from its body and put back, on files of ours and of pg-wasm 0.5.10, in both modes.
 */

const TS = 1_700_000_123;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
const code = (c: string) => expect.objectContaining({ code: c });
/** A Blob of these bytes (a copy, whose buffer is a plain ArrayBuffer). */
const blobOf = (bytes: Uint8Array) => new Blob([bytes.slice()]);
/** Byte equality without Vitest's element-by-element diff, which takes seconds on a large array. */
const same = (got: Uint8Array, want: Uint8Array) =>
  expect(Buffer.compare(got, want), `${got.length} bytes, expected ${want.length}`).toBe(0);

let pg: PgWasm;
let mpk: string;
let vk: string;
let otherVk: string;
let options: SealOptions;
const sender: Policy = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const bob = { id: 'bob@example.com', policy: { ts: TS, con: [{ t: EMAIL, v: 'bob@example.com' }] }, usk: '' };
const carol = { id: 'Carol', policy: { ts: TS - 1, con: [{ t: MOBILE, v: '0612345678' }] }, usk: '' };
/** The hidden policies the header shows: e-mail values removed, a mobile number hinted. */
const hidden = new Map<string, Policy>([
  [bob.id, { ts: TS, con: [{ t: EMAIL, v: '' }] }],
  [carol.id, { ts: TS - 1, con: [{ t: MOBILE, v: '061234****' }] }],
]);
const plain = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 31 + (i >> 9)) & 255);
const small = plain.subarray(0, 5000);

/** Ciphertexts by who sealed them and how. */
const files: Record<'ours' | 'theirs', Record<'memory' | 'stream', Uint8Array>> = {
  ours: { memory: new Uint8Array(), stream: new Uint8Array() },
  theirs: { memory: new Uint8Array(), stream: new Uint8Array() },
};

beforeAll(async () => {
  pg = await loadPgWasm();
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  mpk = kem.mpk;
  vk = ibs.vk;
  otherVk = generateSigningKeys().vk;
  bob.usk = extractUsk(kem.msk, bob.policy);
  carol.usk = extractUsk(kem.msk, carol.policy);
  options = {
    policy: { [bob.id]: bob.policy, [carol.id]: carol.policy },
    pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
  };
  const streamed = async (sealer: typeof sealStream | PgWasm['sealStream']) => {
    const out = collector();
    await sealer(mpk, options, chunkedSource(plain, 65_536), out.writable);
    return out.bytes();
  };
  files.ours.memory = await seal(mpk, options, small);
  files.theirs.memory = await pg.seal(mpk, options, small);
  files.ours.stream = await streamed(sealStream);
  files.theirs.stream = await streamed(pg.sealStream.bind(pg));
});

/** A stream that hands out `bytes` cut at the given chunk lengths (then `rest` at a time), and says if it was cancelled. */
function cutSource(bytes: Uint8Array, cuts: readonly number[], rest = 4096) {
  let offset = 0;
  let next = 0;
  const seen = { cancelled: false, pulledBytes: 0 };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (offset >= bytes.length) return controller.close();
        const length = Math.max(1, cuts[next++] ?? rest);
        const chunk = bytes.slice(offset, offset + length);
        offset += chunk.length;
        seen.pulledBytes += chunk.length;
        controller.enqueue(chunk);
      },
      cancel() {
        seen.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, seen };
}

/** A read(offset, length) source that records what was asked. */
function countingReader(bytes: Uint8Array) {
  const reads: Array<[number, number]> = [];
  const read = async (offset: number, length: number) => {
    reads.push([offset, length]);
    return bytes.slice(offset, offset + length);
  };
  return { read, reads, total: () => reads.reduce((n, [, l]) => n + l, 0) };
}

function expectInspection(got: CiphertextInspection, ct: Uint8Array, mode: 'memory' | 'stream') {
  const { framingBytes } = splitFrame(ct);
  expect(got.framingBytes).toBe(framingBytes);
  expect(got.recipients).toEqual(hidden);
  expect(got.claimedSender).toEqual(sender);
  expect(got.sender.standing).toBe('claimed');
  expect(got.sender.lines).toEqual([{ label: SENDER_WORDING.claimed, policy: sender }]);
  if (mode === 'memory') expect(got.mode).toEqual({ type: 'InMemory', size: expect.any(Number) });
  else expect(got.mode).toEqual({ type: 'Streaming', segmentSize: 262_144, sizeHint: [0n, undefined] });
}

describe('inspectCiphertext', () => {
  for (const who of ['ours', 'theirs'] as const) {
    for (const mode of ['memory', 'stream'] as const) {
      it(`${who}, ${mode}: mode, hidden policies and the claimed sender, from every kind of source`, async () => {
        const ct = files[who][mode];
        const counted = countingReader(ct);
        const streamed = cutSource(ct, [7, 100, 3]);
        const sources: CiphertextSource[] = [ct, blobOf(ct), blobSource(blobOf(ct)), streamed.stream, counted.read];
        for (const source of sources) {
          const got = await inspectCiphertext(source);
          expectInspection(got, ct, mode);
          expect(got.headerSignature).toBe('not-checked');
        }
        // A stream is read as far as the framing's last chunk, then cancelled.
        expect(streamed.seen.cancelled).toBe(true);
        expect(streamed.seen.pulledBytes).toBeLessThan(ct.length);
        // What the unsealers and pg-wasm show once the header is verified.
        const ours = mode === 'memory' ? await Unsealer.new(ct, vk) : await StreamUnsealer.new(chunkedSource(ct), vk);
        const theirs =
          mode === 'memory' ? await pg.Unsealer.new(ct, vk) : await pg.StreamUnsealer.new(chunkedSource(ct), vk);
        const got = await inspectCiphertext(ct);
        expect(got.recipients).toEqual(ours.inspect_header());
        expect(got.recipients).toEqual(theirs.inspect_header());
        expect(got.claimedSender).toEqual(theirs.public_identity());
      });

      it(`${who}, ${mode}: with the PKG's key the header signature is verified, and still only a claim`, async () => {
        const ct = files[who][mode];
        const got = await inspectCiphertext(ct, { vk });
        expectInspection(got, ct, mode);
        expect(got.headerSignature).toBe('verified');
        expect(got.sender.headline).toBe(SENDER_WORDING.claimed);
        await expect(inspectCiphertext(ct, { vk: otherVk })).rejects.toThrow(code('BAD_SIGNATURE'));
        const altered = ct.slice();
        altered[Buffer.from(altered).indexOf('bob@example.com')] = 'c'.charCodeAt(0);
        expect((await inspectCiphertext(altered)).recipients.has('cob@example.com')).toBe(true);
        await expect(inspectCiphertext(altered, { vk })).rejects.toThrow(code('BAD_SIGNATURE'));
        await expect(inspectCiphertext(ct, { vk: 'not a key' })).rejects.toThrow(code('INVALID_KEY'));
      });
    }
  }

  it('asks for the framing alone: reads total framingBytes, and a payload of garbage still inspects', async () => {
    for (const ct of [files.ours.stream, files.theirs.memory]) {
      const { framingBytes } = splitFrame(ct);
      const garbage = concat([ct.subarray(0, framingBytes), new Uint8Array(3000).fill(0xee)]);
      const counted = countingReader(garbage);
      const got = await inspectCiphertext(counted.read, { vk });
      expect(got.framingBytes).toBe(framingBytes);
      expect(counted.total()).toBe(framingBytes);
      expect(Math.max(...counted.reads.map(([o, l]) => o + l))).toBe(framingBytes);
      // The framing alone (a detached header) inspects too.
      expect((await inspectCiphertext(ct.subarray(0, framingBytes), { vk })).recipients).toEqual(hidden);
    }
    const blob = blobOf(files.ours.stream);
    let sliced = 0;
    const spy = Object.create(Blob.prototype, {
      slice: {
        value: (start: number, end: number) => {
          sliced += end - start;
          return blob.slice(start, end);
        },
      },
    }) as Blob;
    await inspectCiphertext(spy);
    expect(sliced).toBe(splitFrame(files.ours.stream).framingBytes);
  });

  it("a source's failure is SOURCE_FAILED; a read answering too much is refused", async () => {
    const failing = async () => {
      throw new Error('disk on fire');
    };
    await expect(inspectCiphertext(failing)).rejects.toThrow(code('SOURCE_FAILED'));
    const broken = new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error('gone')) });
    await expect(inspectCiphertext(broken)).rejects.toThrow(code('SOURCE_FAILED'));
    const greedy = async () => files.ours.stream;
    await expect(inspectCiphertext(greedy)).rejects.toThrow(code('INVALID_INPUT'));
    await expect(inspectCiphertext('a string' as unknown as Uint8Array)).rejects.toThrow(code('INVALID_INPUT'));
  });
});

describe('detached header', () => {
  for (const who of ['ours', 'theirs'] as const) {
    it(`${who}, in memory: detach, store apart, attach; opens in ours and in pg-wasm`, async () => {
      const ct = files[who].memory;
      const { header, body } = detachHeader(ct);
      expect(header.length).toBe(splitFrame(ct).framingBytes);
      same(concat([header, body]), ct);
      // Stored apart: copies, as a database row and a blob store would hold them.
      const joined = attachHeader(header.slice(), body.slice());
      same(joined, ct);
      const [mine] = await (await Unsealer.new(joined, vk)).unseal(bob.id, bob.usk);
      same(mine, small);
      const [theirs] = await (await pg.Unsealer.new(joined, vk)).unseal(carol.id, carol.usk);
      same(theirs, small);
      const blob = attachHeader(header.slice(), blobOf(body));
      same(new Uint8Array(await blob.arrayBuffer()), ct);
    });

    it(`${who}, streaming: split the stream, attach the stored header to the body stream; opens in ours and in pg-wasm`, async () => {
      const ct = files[who].stream;
      const split = splitHeaderStream(chunkedSource(ct, 50_000));
      const header = (await split.header).slice();
      const body = await readAll(split.body);
      same(concat([header, body]), ct);
      for (const open of ['ours', 'theirs'] as const) {
        const out = collector();
        const joined = attachHeader(header, chunkedSource(body, 70_000));
        if (open === 'ours') await (await StreamUnsealer.new(joined, vk)).unseal(bob.id, bob.usk, out.writable);
        else await (await pg.StreamUnsealer.new(joined, vk)).unseal(carol.id, carol.usk, out.writable);
        same(out.bytes(), plain);
      }
    });
  }

  it('splits at the end of the framing whatever the chunking', async () => {
    const ct = files.theirs.stream;
    const { framingBytes } = splitFrame(ct);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 3000 }), { maxLength: 40 }), async (cuts) => {
        const { stream } = cutSource(ct, cuts, 100_000);
        const split = splitHeaderStream(stream);
        const [header, body] = await Promise.all([split.header, readAll(split.body)]);
        same(header, ct.subarray(0, framingBytes));
        expect(body.length).toBe(ct.length - framingBytes);
        same(body, ct.subarray(framingBytes));
      }),
      { numRuns: 150 },
    );
    // And what a random chunking gives back opens.
    const { stream } = cutSource(ct, [1, 9, 1, 700, 13]);
    const split = splitHeaderStream(stream);
    const out = collector();
    const unsealer = await StreamUnsealer.new(attachHeader(await split.header, split.body), vk);
    await unsealer.unseal(bob.id, bob.usk, out.writable);
    same(out.bytes(), plain);
  });

  it('the header can be awaited before the body is read; cancelling the body cancels the source', async () => {
    const { stream, seen } = cutSource(files.ours.stream, [64]);
    const split = splitHeaderStream(stream);
    expect((await split.header).length).toBe(splitFrame(files.ours.stream).framingBytes);
    expect(seen.pulledBytes).toBeLessThan(files.ours.stream.length);
    await split.body.cancel('not wanted');
    expect(seen.cancelled).toBe(true);
  });

  it('cancelling an attached stream cancels its body', async () => {
    const { header, body } = detachHeader(files.ours.stream);
    const { stream, seen } = cutSource(body, []);
    const joined = attachHeader(header, stream).getReader();
    same((await joined.read()).value!, header);
    await joined.cancel('stop');
    expect(seen.cancelled).toBe(true);
  });
});

describe('bad input: every framing error, from every function', () => {
  const ct = () => files.ours.stream.slice();
  const framing = () => files.ours.stream.slice(0, splitFrame(files.ours.stream).framingBytes);
  const headerLength = () => splitFrame(files.ours.stream).header.length;

  const cases: Array<[string, () => Uint8Array, string]> = [
    ['not PostGuard', () => new TextEncoder().encode('just some text, not a ciphertext'), 'NOT_POSTGUARD'],
    ['empty', () => new Uint8Array(0), 'TRUNCATED'],
    ['cut in the preamble', () => ct().subarray(0, 7), 'TRUNCATED'],
    ['cut in the header', () => ct().subarray(0, 10 + headerLength() - 1), 'TRUNCATED'],
    ['cut in the signature length', () => ct().subarray(0, 10 + headerLength() + 2), 'TRUNCATED'],
    ['cut in the signature', () => framing().subarray(0, -1), 'TRUNCATED'],
    [
      'another format version',
      () => {
        const b = ct();
        b[5] = 9;
        return b;
      },
      'UNSUPPORTED_VERSION',
    ],
    [
      'a header length past its bound',
      () => {
        const b = ct();
        new DataView(b.buffer).setUint32(6, MAX_HEADER_BYTES + 1);
        return b;
      },
      'HEADER_TOO_LARGE',
    ],
    [
      'a signature length past its bound',
      () => {
        const b = ct();
        new DataView(b.buffer).setUint32(10 + headerLength(), MAX_SIGNATURE_BYTES + 1);
        return b;
      },
      'HEADER_TOO_LARGE',
    ],
  ];

  for (const [name, bytes, errorCode] of cases) {
    it(`${name}: ${errorCode}`, async () => {
      await expect(inspectCiphertext(bytes())).rejects.toThrow(code(errorCode));
      await expect(inspectCiphertext(blobOf(bytes()))).rejects.toThrow(code(errorCode));
      await expect(inspectCiphertext(countingReader(bytes()).read)).rejects.toThrow(code(errorCode));
      await expect(inspectCiphertext(blobSource(blobOf(bytes())))).rejects.toThrow(code(errorCode));
      await expect(inspectCiphertext(cutSource(bytes(), [3, 5]).stream)).rejects.toThrow(code(errorCode));
      expect(() => detachHeader(bytes())).toThrow(code(errorCode));
      expect(() => attachHeader(bytes().subarray(0, framing().length), new Uint8Array(0))).toThrow(code(errorCode));
      const { stream, seen } = cutSource(bytes(), [4]);
      const split = splitHeaderStream(stream);
      await expect(split.header).rejects.toThrow(code(errorCode));
      await expect(readAll(split.body)).rejects.toThrow(code(errorCode));
      expect(seen.cancelled || seen.pulledBytes === bytes().length).toBe(true);
    });
  }

  it('a header that does not decode: MALFORMED (inspect), though its framing splits', async () => {
    const b = framing();
    // The algorithm variant, before the IV (12) and the streaming mode (4 + 4 + 8 + 1): only 0 exists.
    new DataView(b.buffer).setUint32(10 + headerLength() - 17 - 12 - 4, 7, true);
    await expect(inspectCiphertext(b)).rejects.toThrow(code('MALFORMED'));
    same(detachHeader(b).header, b);
  });

  it('a detached header with anything after its framing: MALFORMED', () => {
    const b = concat([framing(), Uint8Array.of(0)]);
    expect(() => attachHeader(b, new Uint8Array(10))).toThrow(code('MALFORMED'));
    expect(() => attachHeader(b, new Blob([]))).toThrow(code('MALFORMED'));
    expect(() => attachHeader(b, chunkedSource(new Uint8Array(1)))).toThrow(code('MALFORMED'));
    expect(() => attachHeader(framing(), 'body' as unknown as Uint8Array)).toThrow(code('INVALID_INPUT'));
  });

  it('a streaming file whose segment size no reader accepts: MALFORMED', async () => {
    const { header } = splitFrame(files.ours.stream);
    const b = ct();
    // Mode: u32 variant (0 = streaming), then the u32 segment size, then the size hint (u64 + None).
    const at = 10 + header.length - 4 - 8 - 1;
    new DataView(b.buffer).setUint32(at, 64 * 1024 * 1024, true);
    await expect(inspectCiphertext(b)).rejects.toThrow(code('MALFORMED'));
  });
});

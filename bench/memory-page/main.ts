// The page of bench/memory.ts: the client as an app uses it (the crypto worker, and the Origin
// Private File System keeping an upload's sealed bytes, by default): sending generated plaintext,
// and downloading and decrypting an upload by its id, the plaintext read to its end and dropped.
import { PostGuard, memoryKeeper } from 'postguard-ts/client';

export interface MemoryPage {
  send(options: { pkgUrl: string; cryptifyUrl: string; bytes: number; jwt: string }): Promise<string>;
  receive(options: { pkgUrl: string; cryptifyUrl: string; uuid: string; jwt: string }): Promise<number>;
}

/** `total` bytes in 64 KiB pieces, made as they are read. */
function plaintext(total: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (sent >= total) return controller.close();
        const n = Math.min(65_536, total - sent);
        controller.enqueue(new Uint8Array(n).fill(sent & 255));
        sent += n;
      },
    },
    { highWaterMark: 0 },
  );
}

const page: MemoryPage = {
  async send({ pkgUrl, cryptifyUrl, bytes, jwt }) {
    const pg = new PostGuard({ pkgUrl, cryptifyUrl, allowInsecureUrls: true });
    const recipients = [pg.recipient.email('bob@example.com')];
    // The fake PKG signs for its API key, which the page hands over as a session's JWT.
    const sign = pg.sign.session(async () => jwt);
    const t0 = performance.now();
    let sealedMs = 0;
    const { uuid } = await pg.encrypt({ data: plaintext(bytes), recipients, sign }).upload({
      onSealProgress: () => void (sealedMs = performance.now() - t0),
    });
    (globalThis as unknown as { lastSend: unknown }).lastSend = { sealedMs, totalMs: performance.now() - t0 };
    return uuid;
  },
  async receive({ pkgUrl, cryptifyUrl, uuid, jwt }) {
    const pg = new PostGuard({ pkgUrl, cryptifyUrl, allowInsecureUrls: true });
    const result = await pg.open({ uuid }).decrypt({ session: async () => jwt, output: 'stream' });
    if (result.output !== 'stream') throw new Error(`expected a stream, got ${result.output}`);
    let bytes = 0;
    const reader = result.readable.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.length;
    }
    await result.sender;
    return bytes;
  },
};
/** What a stage of the page's send costs alone (bench/memory.ts `--stages`). */
export type SendStage = 'seal' | 'seal+opfs' | 'seal-then-put' | 'upload';

/** Reads `readable` to its end, dropping the bytes. */
async function drain(readable: ReadableStream<Uint8Array>, each: (bytes: Uint8Array) => Promise<void>): Promise<void> {
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    await each(value);
  }
}

/**
 * The send's stages one at a time: sealing alone (the ciphertext dropped), sealing into an OPFS
 * file through createWritable in 5 MB writes (as the keeper does), sealing into chunk PUTs one
 * after the other (nothing kept: a memory keeper), and the page's upload as it is.
 */
export async function stage(options: {
  pkgUrl: string;
  cryptifyUrl: string;
  bytes: number;
  jwt: string;
  stage: SendStage;
}): Promise<{ ms: number }> {
  const { pkgUrl, cryptifyUrl, bytes, jwt } = options;
  const keeper = options.stage === 'seal-then-put' ? { keeper: memoryKeeper() } : {};
  const pg = new PostGuard({ pkgUrl, cryptifyUrl, allowInsecureUrls: true, ...keeper });
  const sealed = pg.encrypt({
    data: plaintext(bytes),
    recipients: [pg.recipient.email('bob@example.com')],
    sign: pg.sign.session(async () => jwt),
  });
  await sealed.size();
  const t0 = performance.now();
  if (options.stage === 'seal') await drain(sealed.stream(), async () => undefined);
  else if (options.stage === 'seal+opfs') {
    const root = await navigator.storage.getDirectory();
    const writable = await (await root.getFileHandle('stage.bin', { create: true })).createWritable();
    let piece = new Uint8Array(5_000_000);
    let filled = 0;
    await drain(sealed.stream(), async (value) => {
      for (let at = 0; at < value.length;) {
        const n = Math.min(piece.length - filled, value.length - at);
        piece.set(value.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === piece.length) {
          await writable.write(piece);
          piece = new Uint8Array(piece.length);
          filled = 0;
        }
      }
    });
    await writable.write(piece.subarray(0, filled));
    await writable.close();
    await root.removeEntry('stage.bin');
  } else await sealed.upload();
  return { ms: performance.now() - t0 };
}

(globalThis as unknown as { memoryPage: MemoryPage }).memoryPage = page;
(globalThis as unknown as { stage: typeof stage }).stage = stage;
document.body.dataset['ready'] = 'true';

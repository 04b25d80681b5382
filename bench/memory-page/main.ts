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
export type SendStage = 'seal' | 'seal+opfs' | 'seal+sync' | 'seal-then-put' | 'upload' | 'fetch' | 'receive';

let uploaded: { bytes: number; uuid: string } | undefined;

/**
 * The receive's stages (on one upload, made once, untimed): the ciphertext fetched and dropped,
 * and the page's receive as it is (fetched, decrypted in the crypto worker, read to its end).
 */
async function receiveStage(options: {
  pkgUrl: string;
  cryptifyUrl: string;
  bytes: number;
  jwt: string;
  readerJwt: string;
  stage: 'fetch' | 'receive';
}): Promise<{ ms: number }> {
  const { pkgUrl, cryptifyUrl, bytes, jwt, readerJwt } = options;
  if (uploaded?.bytes !== bytes) {
    const pg = new PostGuard({ pkgUrl, cryptifyUrl, allowInsecureUrls: true, keeper: memoryKeeper() });
    const sealed = pg.encrypt({
      data: plaintext(bytes),
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.session(async () => jwt),
    });
    uploaded = { bytes, uuid: (await sealed.upload()).uuid };
  }
  const t0 = performance.now();
  if (options.stage === 'fetch') {
    const response = await fetch(`${cryptifyUrl}/filedownload/${uploaded.uuid}`);
    await drain(response.body!, async () => undefined);
  } else await page.receive({ pkgUrl, cryptifyUrl, uuid: uploaded.uuid, jwt: readerJwt });
  return { ms: performance.now() - t0 };
}

/** A worker writing one OPFS file through a sync access handle (the measurement of what it would cost). */
function syncWriter() {
  const source = `let root, handle, at = 0;
onmessage = async ({ data }) => {
  if (data.op === 'open') {
    root = await navigator.storage.getDirectory();
    handle = await (await root.getFileHandle('stage-sync.bin', { create: true })).createSyncAccessHandle();
    handle.truncate(0);
    at = 0;
  } else if (data.op === 'write') at += handle.write(data.bytes, { at });
  else { handle.flush(); handle.close(); await root.removeEntry('stage-sync.bin'); }
  postMessage(0);
};`;
  const worker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
  let queue = Promise.resolve<unknown>(undefined);
  const call = (message: unknown, transfer: Transferable[] = []) =>
    (queue = queue.then(
      () =>
        new Promise((resolve) => {
          worker.onmessage = resolve;
          worker.postMessage(message, transfer);
        }),
    ));
  return { worker, call };
}

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
 * file in 5 MB writes, one in flight, through createWritable on the page or a sync access handle in
 * a worker (what keeper-opfs.ts does where it can), sealing into chunk PUTs one
 * after the other (nothing kept: a memory keeper), and the page's upload as it is.
 */
export async function stage(options: {
  pkgUrl: string;
  cryptifyUrl: string;
  bytes: number;
  jwt: string;
  /** The recipient's session (the receive stages). */
  readerJwt: string;
  stage: SendStage;
}): Promise<{ ms: number }> {
  const { pkgUrl, cryptifyUrl, bytes, jwt } = options;
  if (options.stage === 'fetch' || options.stage === 'receive')
    return receiveStage({ ...options, stage: options.stage });
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
    let last: Promise<unknown> = Promise.resolve();
    await drain(sealed.stream(), async (value) => {
      for (let at = 0; at < value.length;) {
        const n = Math.min(piece.length - filled, value.length - at);
        piece.set(value.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === piece.length) {
          // One write in flight while the next piece is sealed, as the keeper's writer has it.
          await last;
          last = writable.write(piece);
          piece = new Uint8Array(piece.length);
          filled = 0;
        }
      }
    });
    await last;
    await writable.write(piece.subarray(0, filled));
    await writable.close();
    await root.removeEntry('stage.bin');
  } else if (options.stage === 'seal+sync') {
    const writer = syncWriter();
    await writer.call({ op: 'open' });
    let piece = new Uint8Array(5_000_000);
    let filled = 0;
    let last: Promise<unknown> = Promise.resolve();
    await drain(sealed.stream(), async (value) => {
      for (let at = 0; at < value.length;) {
        const n = Math.min(piece.length - filled, value.length - at);
        piece.set(value.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === piece.length) {
          await last;
          last = writer.call({ op: 'write', bytes: piece }, [piece.buffer]);
          piece = new Uint8Array(piece.length);
          filled = 0;
        }
      }
    });
    await last;
    await writer.call({ op: 'write', bytes: piece.subarray(0, filled) });
    await writer.call({ op: 'close' });
    writer.worker.terminate();
  } else await sealed.upload();
  return { ms: performance.now() - t0 };
}

(globalThis as unknown as { memoryPage: MemoryPage }).memoryPage = page;
(globalThis as unknown as { stage: typeof stage }).stage = stage;
document.body.dataset['ready'] = 'true';

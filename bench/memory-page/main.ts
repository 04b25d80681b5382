// The page of bench/memory.ts: the client as an app uses it (the crypto worker, and the Origin
// Private File System keeping an upload's sealed bytes, by default): sending generated plaintext,
// and downloading and decrypting an upload by its id, the plaintext read to its end and dropped.
import { PostGuard } from 'postguard-ts/client';

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
    const { uuid } = await pg.encrypt({ data: plaintext(bytes), recipients, sign }).upload();
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
(globalThis as unknown as { memoryPage: MemoryPage }).memoryPage = page;
document.body.dataset['ready'] = 'true';

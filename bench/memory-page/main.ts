// The page of bench/memory.ts: the client as an app uses it (the crypto worker by default),
// downloading and decrypting an upload by its id, the plaintext read to its end and dropped.
import { PostGuard } from 'postguard-ts/client';

export interface MemoryPage {
  receive(options: { pkgUrl: string; cryptifyUrl: string; uuid: string; jwt: string }): Promise<number>;
}

const page: MemoryPage = {
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

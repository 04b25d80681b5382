// The page both consumer apps build (Vite and esbuild): only what postguard-ts's README shows.
import { PostGuardWorker, type PostGuardWorkerOptions } from 'postguard-ts/worker';
import { prepareDownload, registerDecryptingServiceWorker } from 'postguard-ts/sw';

export interface ConsumerKeys {
  mpk: string;
  vk: string;
  usk: string;
  policy: Record<string, { ts: number; con: Array<{ t: string; v?: string }> }>;
  pubSignKey: { key: string; policy: { ts: number; con: Array<{ t: string; v?: string }> } };
}

export interface ConsumerApi {
  roundTrip(keys: ConsumerKeys, text: string): Promise<{ memory: string; stream: string; sender: string }>;
  download(keys: ConsumerKeys, text: string): Promise<{ body: string; contentType: string | null }>;
}

export function installConsumerApi(swUrl: string, workerOptions: PostGuardWorkerOptions = {}): ConsumerApi {
  const pg = new PostGuardWorker(workerOptions);
  const encode = (text: string) => new TextEncoder().encode(text);
  const api: ConsumerApi = {
    async roundTrip(keys, text) {
      const options = { policy: keys.policy, pubSignKey: keys.pubSignKey };
      const sealed = await pg.seal(keys.mpk, options, encode(text));
      const unsealer = await pg.Unsealer.new(sealed, keys.vk);
      const [plain, verified] = await unsealer.unseal('bob', keys.usk);

      const chunks: Uint8Array[] = [];
      const collect = new WritableStream<Uint8Array>({ write: (chunk) => void chunks.push(chunk) });
      await pg.sealStream(keys.mpk, options, new Blob([encode(text)]).stream(), collect);
      const streamed = new Blob(chunks as BlobPart[]);
      const out: Uint8Array[] = [];
      const sink = new WritableStream<Uint8Array>({ write: (chunk) => void out.push(chunk) });
      await (await pg.StreamUnsealer.new(streamed.stream(), keys.vk)).unseal('bob', keys.usk, sink);
      return {
        memory: new TextDecoder().decode(plain),
        stream: await new Blob(out as BlobPart[]).text(),
        sender: verified.public.con[0]?.v ?? '',
      };
    },
    async download(keys, text) {
      await registerDecryptingServiceWorker(swUrl);
      // The service worker decrypts streamed ciphertexts (sealStream), as they arrive.
      const chunks: Uint8Array[] = [];
      const collect = new WritableStream<Uint8Array>({ write: (chunk) => void chunks.push(chunk) });
      await pg.sealStream(
        keys.mpk,
        { policy: keys.policy, pubSignKey: keys.pubSignKey },
        new Blob([encode(text)]).stream(),
        collect,
      );
      const dl = await prepareDownload({
        source: new Blob(chunks as BlobPart[]),
        recipientId: 'bob',
        usk: keys.usk,
        vk: keys.vk,
        filename: 'hello.txt',
        contentType: 'text/plain',
      });
      const response = await fetch(dl.url);
      const body = await response.text();
      await dl.done;
      return { body, contentType: response.headers.get('content-type') };
    },
  };
  (globalThis as unknown as { consumer: ConsumerApi }).consumer = api;
  return api;
}

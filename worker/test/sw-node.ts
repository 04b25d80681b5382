import { installDecrypter, type DecrypterOptions } from '../sw-core.js';
import { MESSAGE_REGISTER, MESSAGE_REVOKE, type DownloadEvent, type RegisterRequest } from '../sw-protocol.js';

/**
 * The decrypter driven in Node behind a stand-in ServiceWorkerGlobalScope (as in sw-core.test.ts):
 * a page's registration over a port, then a GET of the URL it got, and the page's revoke.
 */

const SCOPE = 'https://app.example/';

/** A save under way: the worker's events to the page, the response, and the page's revoke. */
export interface SaveRun {
  readonly events: DownloadEvent[];
  readonly response: Promise<Response>;
  /** What the page sends when its caller aborts. */
  revoke(): void;
  /** Stops listening to the worker's events. */
  close(): void;
}

/** Registers `request` (completed with `keys` and a filename) with a fresh decrypter, and GETs its URL. */
export async function startSave(request: Partial<RegisterRequest>, options: DecrypterOptions): Promise<SaveRun> {
  const scope = Object.assign(new EventTarget(), { registration: { scope: SCOPE }, fetch: globalThis.fetch });
  installDecrypter(scope as unknown as ServiceWorkerGlobalScope, { progressIntervalMs: 0, ...options });
  const message = (data: unknown, ports: MessagePort[] = []) =>
    scope.dispatchEvent(Object.assign(new Event('message'), { data, ports, waitUntil() {} }));
  const { port1, port2 } = new MessageChannel();
  const events: DownloadEvent[] = [];
  const registered = new Promise<DownloadEvent>((resolve) => {
    port1.onmessage = ({ data }: MessageEvent<DownloadEvent>) => {
      events.push(data);
      if (data.type === 'registered') resolve(data);
    };
  });
  message({ type: MESSAGE_REGISTER, request: { filename: 'report.bin', ...request } }, [port2]);
  const reply = await registered;
  if (reply.type !== 'registered' || !reply.ok) throw new Error(`not registered: ${JSON.stringify(reply)}`);
  let response: Promise<Response> | undefined;
  scope.dispatchEvent(
    Object.assign(new Event('fetch'), {
      request: new Request(reply.url),
      respondWith: (r: Response | Promise<Response>) => (response = Promise.resolve(r)),
      waitUntil: () => undefined,
    }),
  );
  return {
    events,
    response: response!,
    revoke: () => message({ type: MESSAGE_REVOKE, id: reply.id }),
    close: () => port1.close(),
  };
}

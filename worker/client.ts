/**
 * postguard-ts/worker: the library's API on the main thread, with the work done in a module
 * worker. Same names and shapes as the library (and @e4a/pg-wasm), every call async:
 *
 * ```ts
 * const pg = new PostGuardWorker();
 * const ct = await pg.seal(mpk, options, bytes);
 * await pg.sealStream(mpk, options, readable, writable);     // streams are relayed to the worker
 * const u = await pg.Unsealer.new(ct, vk);
 * (await u.inspect_header()).get(id); const [plain, sender] = await u.unseal(id, usk); u.free();
 * const su = await pg.StreamUnsealer.new(readable, vk);
 * const streamed = await su.unseal(id, usk, writable);     // the sender, once the last segment verified
 * ```
 *
 * Errors are the library's (PostGuardError with `code`), rebuilt on this side. Also exported here:
 * the PKG client (lib/pkg) and the page-side service-worker helpers (download.ts; also
 * `postguard-ts/sw`). The service worker's own code is in `postguard-ts/sw/install`.
 *
 * @module postguard-ts/worker
 */
import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';
import { releaseProxy, wrap, type Endpoint, type Remote } from 'comlink';
import type { Policy } from '../lib/policy.js';
import type { SealOptions } from '../lib/seal.js';
import type { VerificationResult } from '../lib/signatures.js';
import type { CryptoWorkerApi, RemoteHeaderView, RemoteStreamUnsealer, RemoteUnsealer } from './api.js';
import { ErrorCode, InputError, describeThrown, isPostGuardError } from '../lib/errors.js';
import { offerPageDecrypter } from './page-decrypter.js';
import { isWebKit } from './relay-settings.js';
import { sendingOn, sentWritableSettled } from './transfer.js';
import { WorkerChannel } from './worker-channel.js';

/** How `new PostGuardWorker(options)` reaches its crypto worker; none is needed with a bundler that follows `new URL(...)`. */
export interface PostGuardWorkerOptions {
  /** A worker you started yourself (e.g. from your own bundle of crypto.worker.js). */
  worker?: Worker;
  /**
   * Where the crypto worker script is served, for bundlers that do not follow
   * `new Worker(new URL(...), import.meta.url)` (esbuild): copy `postguard-ts/worker/script` (one
   * self-contained ES module) to your origin and pass its URL. Vite (with `postguard-ts/vite`),
   * webpack 5 and Rollup's worker plugins find the worker without it.
   */
  workerUrl?: string | URL;
  /** Any comlink endpoint serving worker-api.ts instead of a worker (tests: one end of a MessageChannel). */
  endpoint?: Endpoint;
}

/**
 * Whether this page relays the crypto worker's streams over the worker's own channel
 * (worker-channel.ts): in Firefox, where a MessagePort per stream is ~70x slower, and in WebKit,
 * where every port message goes through the network process: there the channel took a fifth less
 * CPU across the browser's threads for a 64 MiB seal or unseal (worker/README.md). Chromium moves
 * bytes over a port as fast, and keeps a port per stream.
 */
const relaysOverWorkerChannel = (): boolean =>
  typeof navigator !== 'undefined' && (/\bFirefox\//.test(navigator.userAgent) || isWebKit(navigator.userAgent));

/** How long a failed call waits for the abort of its writable to arrive, so the sink has seen it first. */
const ABORT_ARRIVAL_MS = 2000;

/**
 * Runs a call that was handed `writable`, and settles only after `writable` itself did here: closed
 * when the call succeeds, aborted (or given up on after a moment) when it fails.
 */
async function afterWritable<T>(writable: WritableStream<Uint8Array>, call: () => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await call();
  } catch (error) {
    const settled = sentWritableSettled(writable);
    if (settled !== undefined) {
      await Promise.race([
        settled.catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, ABORT_ARRIVAL_MS)),
      ]);
    }
    throw error;
  }
  await sentWritableSettled(writable);
  return result;
}

/** The fields of the options the library reads (lib/seal.ts); nothing else is sent. */
const OPTION_FIELDS = ['policy', 'pubSignKey', 'privSignKey', 'skipEncryption', 'size'] as const;

/**
 * How deep the options sent may nest. Valid ones nest five objects (options, policy, entry, con,
 * attribute, whose fields are strings); the bound keeps what crosses far from any engine's recursion
 * limit when it is cloned here and rebuilt in the worker (a failure there would never answer).
 */
const MAX_OPTIONS_DEPTH = 64;

function cannotSend(what: string, ...cause: [unknown?]): InputError {
  return new InputError(
    ErrorCode.INVALID_INPUT,
    `options: ${what}`,
    cause.length > 0 ? { cause: cause[0] } : undefined,
  );
}

const TOO_DEEP = 'nested too deeply to send to the worker (an attribute value must be a string)';

/** Whether a plain, cloned value nests objects `limit` levels deep or more (each object visited once). */
function nestsAtLeast(root: unknown, limit: number): boolean {
  const seen = new Set<object>();
  const stack: Array<[unknown, number]> = [[root, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null || seen.has(value)) continue;
    if (depth >= limit) return true;
    seen.add(value);
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) continue;
    const children =
      value instanceof Map
        ? [...value.keys(), ...value.values()]
        : value instanceof Set
          ? [...value]
          : Object.values(value);
    for (const child of children) stack.push([child, depth + 1]);
  }
  return false;
}

/** Safely, the name of what structured clone threw (RangeError, InternalError, DataCloneError, …). */
function nameOf(thrown: unknown): string {
  try {
    const name: unknown = (thrown as { name?: unknown }).name;
    return typeof name === 'string' ? name : '';
  } catch {
    return '';
  }
}

/**
 * The seal options as the worker will get them: the fields the library reads, copied here first
 * by structured clone (what postMessage would do). Whatever goes wrong in that copy is an
 * InputError, as the library in-process gives for options it cannot read, rather than the raw
 * throw out of comlink: a getter or Proxy trap that throws, nesting too deep to clone (RangeError,
 * or Firefox's InternalError), a value clone cannot carry (DataCloneError).
 */
function optionsForWorker(options: SealOptions): SealOptions {
  let copy: unknown;
  try {
    let picked: unknown = options;
    if (typeof options === 'object' && options !== null) {
      const fields: Record<string, unknown> = {};
      for (const field of OPTION_FIELDS) {
        const value = (options as unknown as Record<string, unknown>)[field];
        if (value !== undefined) fields[field] = value;
      }
      picked = fields;
    }
    copy = structuredClone(picked);
  } catch (error) {
    if (isPostGuardError(error)) throw error;
    const name = nameOf(error);
    if (name === 'RangeError' || name === 'InternalError') throw cannotSend(TOO_DEEP, error);
    if (name === 'DataCloneError') {
      throw cannotSend(`hold a value that cannot be sent to the worker: ${describeThrown(error)}`, error);
    }
    throw cannotSend(`reading them to send to the worker threw: ${describeThrown(error)}`, error);
  }
  if (nestsAtLeast(copy, MAX_OPTIONS_DEPTH)) throw cannotSend(TOO_DEEP);
  return copy as SealOptions;
}

/** Runs `act` on a stream of the caller's, whatever state (or type) it is in. */
async function quietly(act: () => Promise<unknown>): Promise<void> {
  try {
    await act();
  } catch {
    // Locked, already errored or not a stream: the caller's error is the one to report.
  }
}

/** What both worker-side unsealers show, and how they are released. */
abstract class WorkerHeaderView<R extends RemoteHeaderView> {
  protected constructor(protected readonly remote: Remote<R>) {}

  private get view(): Remote<RemoteHeaderView> {
    return this.remote as unknown as Remote<RemoteHeaderView>;
  }

  /** Recipient id → that recipient's hidden policy (use it to request the key). */
  inspect_header(): Promise<Map<string, Policy>> {
    return this.view.inspect_header();
  }

  /** camelCase alias of `inspect_header`. */
  inspectHeader(): Promise<Map<string, Policy>> {
    return this.inspect_header();
  }

  /** The sender the header claims: a claim until `unseal` verified the content (see the library's Unsealer). */
  public_identity(): Promise<Policy> {
    return this.view.public_identity();
  }

  /** camelCase alias of `public_identity`: the claimed sender. */
  publicIdentity(): Promise<Policy> {
    return this.public_identity();
  }

  /** Releases the worker-side object (pg-wasm objects have free() too). */
  free(): void {
    this.remote[releaseProxy]();
  }
}

/** An Unsealer that lives in the worker. Call free() when done with it. */
export class WorkerUnsealer extends WorkerHeaderView<RemoteUnsealer> {
  /** @internal */
  static wrap(remote: Remote<RemoteUnsealer>): WorkerUnsealer {
    return new WorkerUnsealer(remote);
  }

  /** Decrypts for `recipientId` in the worker: the plaintext (transferred back) and who signed it. */
  unseal(recipientId: string, usk: UserKeys): Promise<[Uint8Array, VerificationResult]> {
    return this.remote.unseal(recipientId, usk);
  }
}

/** A StreamUnsealer that lives in the worker; it reads the ciphertext stream there. */
export class WorkerStreamUnsealer extends WorkerHeaderView<RemoteStreamUnsealer> {
  private constructor(
    remote: Remote<RemoteStreamUnsealer>,
    private readonly channel: WorkerChannel | undefined,
  ) {
    super(remote);
  }

  /** @internal */
  static wrap(remote: Remote<RemoteStreamUnsealer>, channel?: WorkerChannel): WorkerStreamUnsealer {
    return new WorkerStreamUnsealer(remote, channel);
  }

  /**
   * Decrypts the rest of the stream into `writable` (relayed from the worker). Plaintext is
   * written segment by segment after each authenticates; `writable` is closed after the final
   * segment authenticated, or aborted with the error (code intact) if anything fails.
   */
  unseal(recipientId: string, usk: UserKeys, writable: WritableStream<Uint8Array>): Promise<VerificationResult> {
    return afterWritable(writable, () => sendingOn(this.channel, () => this.remote.unseal(recipientId, usk, writable)));
  }
}

/**
 * The library's sealing and unsealing in a module worker, so a page stays responsive while large
 * files are encrypted or decrypted. Start one per page and reuse it; its calls have the library's
 * names and shapes, made async, and its errors keep their codes. Streams stay on your thread and
 * are relayed to the worker with bounded memory.
 */
export class PostGuardWorker {
  /** The worker, unless an endpoint was given. */
  readonly worker: Worker | undefined;
  private readonly remote: Remote<CryptoWorkerApi>;
  /**
   * The worker's own channel, which relays the streams (worker-channel.ts: a MessagePort per stream
   * is slow in Firefox); none with an endpoint, whose streams each get a MessagePort.
   */
  private readonly channel: WorkerChannel | undefined;
  private readonly withdraw: () => void;

  /** pg-wasm's `Unsealer.new`, answered by the worker: `await pg.Unsealer.new(ciphertext, vk)`. */
  readonly Unsealer = {
    /** Parses and authenticates an in-memory ciphertext's header in the worker. */
    new: async (input: Uint8Array, vk: VerifyingKeys): Promise<WorkerUnsealer> =>
      WorkerUnsealer.wrap((await this.remote.unsealer(input, vk)) as unknown as Remote<RemoteUnsealer>),
  };

  /** pg-wasm's `StreamUnsealer.new`, answered by the worker: `await pg.StreamUnsealer.new(readable, vk)`. */
  readonly StreamUnsealer = {
    /** Relays `readable` to the worker, which reads and authenticates the header from it. */
    new: async (readable: ReadableStream<Uint8Array>, vk: VerifyingKeys): Promise<WorkerStreamUnsealer> =>
      WorkerStreamUnsealer.wrap(
        (await sendingOn(this.channel, () =>
          this.remote.streamUnsealer(readable, vk),
        )) as unknown as Remote<RemoteStreamUnsealer>,
        this.channel,
      ),
  };

  constructor(options: PostGuardWorkerOptions = {}) {
    if (options.endpoint !== undefined) {
      this.worker = options.worker;
      this.channel = undefined;
      this.remote = wrap<CryptoWorkerApi>(options.endpoint);
    } else {
      this.worker =
        options.worker ??
        (options.workerUrl !== undefined
          ? new Worker(options.workerUrl, { type: 'module', name: 'postguard-crypto' })
          : new Worker(new URL('./crypto.worker.js', import.meta.url), { type: 'module', name: 'postguard-crypto' }));
      this.channel = relaysOverWorkerChannel() ? new WorkerChannel(this.worker) : undefined;
      this.remote = wrap<CryptoWorkerApi>(this.channel?.endpoint ?? this.worker);
    }
    // This page's service-worker downloads are decrypted here (download.ts, sw-offload.ts).
    this.withdraw = offerPageDecrypter(() => this.remote.decrypterPort());
  }

  /** In-memory seal. `plain` is copied to the worker; the ciphertext is transferred back. */
  async seal(mpk: string, options: SealOptions, plain: Uint8Array): Promise<Uint8Array> {
    return this.remote.seal(mpk, optionsForWorker(options), plain);
  }

  /**
   * Streaming seal: both streams are relayed to the worker (the source's chunks are copied as they
   * are read, so it may reuse them). Resolves when `writable` was
   * closed after the last segment; on failure `writable` is aborted and the promise rejects, both
   * with the same coded error.
   */
  async sealStream(
    mpk: string,
    options: SealOptions,
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
  ): Promise<void> {
    let sent: SealOptions;
    try {
      sent = optionsForWorker(options);
    } catch (error) {
      // As the library does with options it refuses: the sink aborted, the source cancelled, with the error.
      await quietly(() => writable.abort(error));
      await quietly(() => readable.cancel(error));
      throw error;
    }
    return afterWritable(writable, () =>
      sendingOn(this.channel, () => this.remote.sealStream(mpk, sent, readable, writable)),
    );
  }

  /** The SHAKE128 backend in the worker ('wasm', or '@noble/hashes' where WebAssembly is refused). */
  shakeBackend(): Promise<string> {
    return this.remote.shakeBackend();
  }

  /** Whether the worker hashes streams' transcripts on a nested worker of its own (false where it cannot start one). */
  hashesOnOwnThread(): Promise<boolean> {
    return this.remote.hashesOnOwnThread();
  }

  /** Stops the worker; pending calls never settle. */
  terminate(): void {
    this.withdraw();
    this.remote[releaseProxy]();
    this.worker?.terminate();
  }
}

export { encodeError, reviveError, isWireError } from './errors.js';
export * from './download.js';
export { plaintextSize } from '../lib/segment-map.js';
/**
 * The stream relay the crypto worker and the decrypting service worker speak: a ReadableStream
 * served over a MessagePort with flow control and coded errors both ways, for passing a stream to
 * another thread in browsers that cannot transfer streams (Safari) or where copying beats it.
 */
export { readableToPort, portToReadable } from './port-stream.js';
export type { SenderOptions, ReceiverOptions } from './port-stream.js';
export type { RelayPort } from './worker-channel.js';
export * from '../lib/pkg/index.js';
export {
  PostGuardError,
  FormatError,
  AuthenticationError,
  InputError,
  ErrorCode,
  isPostGuardError,
} from '../lib/errors.js';
export type { Policy, Attribute, EncryptionPolicy } from '../lib/policy.js';
export type { SealOptions, SigningKeyInput } from '../lib/seal.js';
export type { VerificationResult } from '../lib/signatures.js';
export {
  senderReport,
  claimedSenderReport,
  isDemoCredential,
  SENDER_WORDING,
  SENDER_EXPLANATION,
} from '../lib/sender.js';
export type { SenderReport, SenderLine, SenderStanding } from '../lib/sender.js';

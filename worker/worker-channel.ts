import type { Endpoint } from 'comlink';

/**
 * Relayed streams (port-stream.ts) over a worker's own channel (`Worker.postMessage` on the page,
 * `self.postMessage` in the worker) instead of a MessagePort each. In Firefox a MessagePort between
 * the page and a worker costs ~1.3 ms per 256 KiB transferred, against ~0.02 ms for the same transfer
 * over the worker's own channel (bench/worker-hops.ts; it goes through another thread, the other is
 * a move in the same process), so a 64 MiB stream sealed or unsealed in the crypto worker spent most
 * of its time moving bytes (worker/README.md, "The crypto worker in Firefox"). Chromium and WebKit
 * move both about as fast.
 *
 * A WorkerChannel multiplexes any number of RelayPorts over one such channel: each message is
 * wrapped with its port's id, and comlink, which serves the same channel, is given `endpoint`, a
 * view of it that never shows comlink those messages. Ids are chosen by the page (one per stream it
 * hands over); the worker opens a port for an id when the stream arrives with a call.
 */

/** What the stream relay (readableToPort, portToReadable) needs of a port: a MessagePort is one. */
export interface RelayPort {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
  close(): void;
}

/** A worker's own channel, on either side: the page's Worker, or the worker's global scope. */
export type ChannelTarget = Pick<Worker, 'postMessage' | 'addEventListener' | 'removeEventListener'>;

/** The key under which a relayed stream's message carries its port's id. */
const TAG = '__pgRelay';
interface Tagged {
  [TAG]: number;
  m: unknown;
}
const isTagged = (data: unknown): data is Tagged =>
  typeof data === 'object' && data !== null && typeof (data as Partial<Tagged>)[TAG] === 'number';

/** What goes over comlink in place of a transferred MessagePort: the id of the stream's port. */
export interface ChannelWire {
  [TAG]: number;
}
export const isChannelWire = isTagged as (wire: unknown) => wire is ChannelWire;

/**
 * Ports closed on this side, remembered so that messages still on their way to them are dropped
 * rather than kept for a port that will never open; the oldest are forgotten (messages for a port
 * arrive within milliseconds of its close, not after a thousand more streams).
 */
const REMEMBERED_CLOSED = 1024;
/**
 * Ids the other side has written to before this side opened them (a writable's window grant can
 * arrive before the call that carries the writable), kept until opened; the oldest beyond this
 * many are dropped.
 */
const MAX_EARLY_PORTS = 64;

class ChannelPort implements RelayPort {
  private handler: ((event: MessageEvent) => void) | null = null;
  private readonly queued: unknown[] = [];
  private closed = false;

  constructor(
    private readonly channel: WorkerChannel,
    readonly id: number,
  ) {}

  get onmessage(): ((event: MessageEvent) => void) | null {
    return this.handler;
  }

  /** Like a MessagePort's: setting it starts delivery, messages that came before first. */
  set onmessage(handler: ((event: MessageEvent) => void) | null) {
    this.handler = handler;
    while (handler !== null && this.queued.length > 0 && !this.closed) this.deliver(this.queued.shift());
  }

  postMessage(message: unknown, transfer: Transferable[] = []): void {
    if (this.closed) return;
    this.channel.send({ [TAG]: this.id, m: message }, transfer);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queued.length = 0;
    this.channel.forget(this.id);
  }

  deliver(message: unknown): void {
    if (this.closed) return;
    if (this.handler === null) this.queued.push(message);
    else this.handler({ data: message } as MessageEvent);
  }
}

export class WorkerChannel {
  private readonly ports = new Map<number, ChannelPort>();
  private readonly early = new Map<number, unknown[]>();
  private readonly closed = new Set<number>();
  private nextId = 1;
  /** The same channel for comlink: everything but the relayed streams' messages. */
  readonly endpoint: Endpoint;

  constructor(private readonly target: ChannelTarget) {
    target.addEventListener('message', (event) => this.route(event));
    // A MessagePort as the channel (tests) delivers to listeners only once started; a worker has no start.
    (target as { start?: () => void }).start?.();
    const wrapped = new Map<EventListenerOrEventListenerObject, EventListener>();
    this.endpoint = {
      postMessage: (message: unknown, transfer?: Transferable[]) => target.postMessage(message, transfer ?? []),
      addEventListener: (type: string, listener: EventListenerOrEventListenerObject) => {
        const only: EventListener = (event) => {
          if (isTagged((event as MessageEvent).data)) return;
          if (typeof listener === 'function') listener(event);
          else listener.handleEvent(event);
        };
        wrapped.set(listener, only);
        target.addEventListener(type as 'message', only);
      },
      removeEventListener: (type: string, listener: EventListenerOrEventListenerObject) => {
        const only = wrapped.get(listener);
        if (only === undefined) return;
        wrapped.delete(listener);
        target.removeEventListener(type as 'message', only);
      },
    };
  }

  /** A new port (the page's end of a stream it hands over); its id goes to the other side. */
  open(): ChannelPort {
    return this.attach(this.nextId++);
  }

  /** The end of the port the other side opened under `id`. */
  accept(id: number): ChannelPort {
    if (this.ports.has(id) || this.closed.has(id)) throw new Error(`relay port ${id} was already opened`);
    return this.attach(id);
  }

  /** @internal */
  send(message: Tagged, transfer: Transferable[]): void {
    this.target.postMessage(message, transfer);
  }

  /** @internal */
  forget(id: number): void {
    this.ports.delete(id);
    this.closed.add(id);
    if (this.closed.size > REMEMBERED_CLOSED) this.closed.delete(this.closed.values().next().value!);
  }

  private attach(id: number): ChannelPort {
    const port = new ChannelPort(this, id);
    this.ports.set(id, port);
    const early = this.early.get(id);
    this.early.delete(id);
    for (const message of early ?? []) port.deliver(message);
    return port;
  }

  private route(event: Event): void {
    const data = (event as MessageEvent).data;
    if (!isTagged(data)) return;
    const id = data[TAG];
    const port = this.ports.get(id);
    if (port !== undefined) return port.deliver(data.m);
    if (this.closed.has(id)) return;
    let early = this.early.get(id);
    if (early === undefined) {
      if (this.early.size >= MAX_EARLY_PORTS) this.early.delete(this.early.keys().next().value!);
      early = [];
      this.early.set(id, early);
    }
    early.push(data.m);
  }
}

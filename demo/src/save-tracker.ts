/// <reference lib="webworker" />
import type { DecrypterRoute } from 'postguard-ts/sw/install';
import { MESSAGE_SAVES, type SavesReply, type TrackedSave } from './save-protocol.js';

/**
 * The demo's service worker keeps an eye on the decrypter's saves of a ciphertext URL (the receive
 * page's "Save all"), so that a page loaded again finds a save still running and shows it, instead
 * of offering to start a second copy (save-protocol.ts MESSAGE_SAVES, running-save.ts).
 *
 * A page's registration reaches the decrypter through a port of ours that relays every message
 * both ways and reads the decrypter's events on the way (registered, verifying, progress, done,
 * error); nothing of the decrypter changes. Where the browser says so (FetchEvent.request.signal),
 * a save whose download had not begun when its page went away is marked failed at once: the
 * browser dropped that navigation, so nothing is being saved.
 */

/** The decrypter's registration message on the wire (worker/sw-protocol.ts MESSAGE_REGISTER). */
const MESSAGE_REGISTER = 'postguard:register';
/** Saves remembered, newest kept; ended ones go first. */
const MAX_TRACKED = 32;
/** Pages watching one save. */
const MAX_WATCHERS = 8;

interface Entry {
  /** The ciphertext's URL. */
  source: string;
  /** The decrypter's registration id (the download URL's), once it answered. */
  id?: string;
  save: TrackedSave;
  watchers: Set<MessagePort>;
  /** Resolves when the save ends (a watching page keeps the worker up until then). */
  ended: Promise<void>;
  end: () => void;
}

type DecrypterEvent =
  | { type: 'registered'; ok: true; id: string }
  | { type: 'registered'; ok: false; error?: { message?: string } }
  | { type: 'verifying' | 'progress'; bytes: number }
  | { type: 'done'; bytes: number; result: unknown }
  | { type: 'error'; error?: { message?: string } }
  | { type: 'alive' | 'range' };

const running = (save: TrackedSave) => save.state !== 'done' && save.state !== 'failed';

function post(port: MessagePort, reply: SavesReply): void {
  try {
    port.postMessage(reply);
  } catch {
    // the page is gone
  }
}

export class SaveTracker {
  private readonly entries: Entry[] = [];

  constructor(private readonly decrypter: DecrypterRoute) {}

  /** The worker's message listener: the pages' questions, and the decrypter's messages (watched on the way). */
  onMessage(event: ExtendableMessageEvent): void {
    const data = event.data as {
      type?: unknown;
      source?: unknown;
      request?: { source?: { kind?: unknown; url?: unknown }; disposition?: unknown; filename?: unknown };
    } | null;
    if (data?.type === MESSAGE_SAVES) return this.answer(event, data.source);
    const reply = event.ports[0];
    const source = data?.request?.source;
    if (
      data?.type !== MESSAGE_REGISTER ||
      reply === undefined ||
      source?.kind !== 'url' ||
      typeof source.url !== 'string' ||
      data.request?.disposition === 'inline'
    )
      return this.decrypter.onMessage(event);
    const entry = this.track(source.url, typeof data.request?.filename === 'string' ? data.request.filename : '');
    const relay = new MessageChannel();
    relay.port1.onmessage = ({ data: message }: MessageEvent<DecrypterEvent>) => {
      this.observe(entry, message);
      try {
        reply.postMessage(message);
      } catch {
        // the page is gone; the save goes on
      }
    };
    reply.onmessage = ({ data: message }: MessageEvent<unknown>) => relay.port1.postMessage(message);
    this.decrypter.onMessage(new ExtendableMessageEvent('message', { data: event.data, ports: [relay.port2] }));
  }

  /** A fetch of a download URL: a page that goes away before the download began stops that save. */
  watchFetch(request: Request): void {
    const id = new URL(request.url).pathname.split('/').at(-2);
    const entry = this.entries.find((e) => e.id === id);
    if (entry === undefined) return;
    request.signal.addEventListener('abort', () => {
      if (entry.save.state !== 'waiting' && entry.save.state !== 'verifying') return;
      this.update(entry, {
        ...entry.save,
        state: 'failed',
        error: 'the page was reloaded or closed before the download began',
      });
    });
  }

  private track(source: string, filename: string): Entry {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const entry: Entry = { source, save: { filename, state: 'waiting', bytes: 0 }, watchers: new Set(), ended, end };
    this.entries.push(entry);
    while (this.entries.length > MAX_TRACKED) {
      const old = this.entries.findIndex((e) => !running(e.save));
      this.entries.splice(old === -1 ? 0 : old, 1);
    }
    return entry;
  }

  private observe(entry: Entry, event: DecrypterEvent): void {
    const save = entry.save;
    switch (event.type) {
      case 'registered':
        if (event.ok) entry.id = event.id;
        else this.update(entry, { ...save, state: 'failed', error: event.error?.message ?? 'not registered' });
        break;
      case 'verifying':
        this.update(entry, { ...save, state: 'verifying', bytes: event.bytes });
        break;
      case 'progress':
        this.update(entry, { ...save, state: 'saving', bytes: event.bytes });
        break;
      case 'done':
        this.update(entry, { ...save, state: 'done', bytes: event.bytes, result: event.result });
        break;
      case 'error':
        this.update(entry, { ...save, state: 'failed', error: event.error?.message ?? 'the save failed' });
        break;
    }
  }

  private update(entry: Entry, save: TrackedSave): void {
    entry.save = save;
    for (const port of entry.watchers) post(port, { type: 'save', save });
    if (running(save)) return;
    for (const port of entry.watchers) port.close();
    entry.watchers.clear();
    entry.end();
  }

  /** Tells a page the newest save of the ciphertext whose URL ends in `source`, and its changes until it ends. */
  private answer(event: ExtendableMessageEvent, source: unknown): void {
    const port = event.ports[0];
    if (port === undefined) return;
    const entry =
      typeof source === 'string' && source !== ''
        ? this.entries.findLast((e) => new URL(e.source).pathname.endsWith(source))
        : undefined;
    post(port, { type: 'save', save: entry?.save ?? null });
    if (entry === undefined || !running(entry.save) || entry.watchers.size >= MAX_WATCHERS) return port.close();
    entry.watchers.add(port);
    // The page that started the save kept the worker up; now this one does, until the save ends.
    event.waitUntil(entry.ended);
  }
}

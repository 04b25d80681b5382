import type { Browser, CDPSession } from '@playwright/test';

/**
 * Live memory per JavaScript thread of the demo, through the DevTools protocol: for the page, the
 * crypto worker and the service worker, the V8 heap in use plus ArrayBuffer backing stores
 * (Runtime.getHeapUsage), each read right after a forced garbage collection so a sample counts
 * what is held, not what is waiting to be collected. Sampling runs in the background while the
 * browser works; `stop()` returns the baseline, the peaks and the growth per thread.
 */

export type ThreadKind = 'page' | 'worker' | 'service_worker';

export interface MemoryReport {
  /** MiB per thread before the work started. */
  baseline: Record<string, number>;
  /** Highest MiB per thread while it ran. */
  peak: Record<string, number>;
  /** peak − baseline, MiB. */
  growth: Record<string, number>;
  samples: number;
}

const MiB = 1024 * 1024;
const round = (bytes: number): number => Math.round((bytes / MiB) * 10) / 10;

interface Attached {
  kind: ThreadKind;
  url: string;
  sessionId: string;
}

export class ThreadMemory {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (r: unknown) => void; reject: (e: Error) => void }>();
  private running = false;
  private loop: Promise<void> | undefined;
  private baseline: Record<string, number> = {};
  private peak: Record<string, number> = {};
  private samples = 0;

  private constructor(
    private readonly cdp: CDPSession,
    readonly threads: Attached[],
  ) {}

  /** Attaches to every page, worker and service worker whose URL starts with `origin`. */
  static async attach(browser: Browser, origin: string): Promise<ThreadMemory> {
    const cdp = await browser.newBrowserCDPSession();
    const { targetInfos } = (await cdp.send('Target.getTargets')) as {
      targetInfos: Array<{ targetId: string; type: string; url: string }>;
    };
    const threads: Attached[] = [];
    for (const target of targetInfos) {
      if (!['page', 'worker', 'service_worker'].includes(target.type) || !target.url.startsWith(origin)) continue;
      const { sessionId } = (await cdp.send('Target.attachToTarget', {
        targetId: target.targetId,
        flatten: false,
      })) as { sessionId: string };
      threads.push({ kind: target.type as ThreadKind, url: target.url, sessionId });
    }
    const monitor = new ThreadMemory(cdp, threads);
    cdp.on('Target.receivedMessageFromTarget', (event: { message: string }) => {
      const message = JSON.parse(event.message) as { id?: number; result?: unknown; error?: { message: string } };
      const waiter = message.id === undefined ? undefined : monitor.pending.get(message.id);
      if (waiter === undefined) return;
      monitor.pending.delete(message.id!);
      if (message.error) waiter.reject(new Error(message.error.message));
      else waiter.resolve(message.result);
    });
    return monitor;
  }

  private call(sessionId: string, method: string): Promise<unknown> {
    const id = ++this.nextId;
    const answer = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    void this.cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method }) });
    return answer;
  }

  /** Bytes held per thread now (after a collection). */
  async sample(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const thread of this.threads) {
      await this.call(thread.sessionId, 'HeapProfiler.collectGarbage');
      const usage = (await this.call(thread.sessionId, 'Runtime.getHeapUsage')) as {
        usedSize: number;
        backingStorageSize?: number;
      };
      out[thread.kind] = (out[thread.kind] ?? 0) + usage.usedSize + (usage.backingStorageSize ?? 0);
    }
    return out;
  }

  /** Takes the baseline and keeps sampling every `intervalMs` until stop(). */
  async start(intervalMs = 1000): Promise<void> {
    this.baseline = await this.sample();
    this.peak = { ...this.baseline };
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const now = await this.sample();
        this.samples++;
        for (const [kind, bytes] of Object.entries(now)) this.peak[kind] = Math.max(this.peak[kind] ?? 0, bytes);
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
      }
    })();
  }

  async stop(): Promise<MemoryReport> {
    this.running = false;
    await this.loop;
    await this.cdp.detach().catch(() => undefined);
    const kinds = Object.keys(this.baseline);
    return {
      baseline: Object.fromEntries(kinds.map((k) => [k, round(this.baseline[k]!)])),
      peak: Object.fromEntries(kinds.map((k) => [k, round(this.peak[k]!)])),
      growth: Object.fromEntries(kinds.map((k) => [k, round(this.peak[k]! - this.baseline[k]!)])),
      samples: this.samples,
    };
  }
}

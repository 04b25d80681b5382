import type { Browser, CDPSession, Page } from '@playwright/test';

/**
 * Chromium CPU profiles of the page, its dedicated workers and its service worker, taken over the DevTools protocol
 * while a benchmark step runs, and a bottom-up summary (self time by function). Workers are
 * reached from a browser-level CDP session: attach to the worker's target (non-flat mode, so
 * Playwright's own session handling is left alone) and speak to it through Target.sendMessageToTarget.
 */

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}

export interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

interface TargetInfo {
  targetId: string;
  type: string;
  title: string;
  url: string;
}

/** A tiny client for one target attached in non-flat mode. */
class TargetChannel {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(
    private readonly browserSession: CDPSession,
    private readonly sessionId: string,
  ) {}

  static async attach(browserSession: CDPSession, targetId: string): Promise<TargetChannel> {
    const { sessionId } = (await browserSession.send('Target.attachToTarget', { targetId, flatten: false })) as {
      sessionId: string;
    };
    const channel = new TargetChannel(browserSession, sessionId);
    browserSession.on('Target.receivedMessageFromTarget', (event: { sessionId: string; message: string }) => {
      if (event.sessionId !== sessionId) return;
      const message = JSON.parse(event.message) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id === undefined) return;
      const waiter = channel.waiting.get(message.id);
      channel.waiting.delete(message.id);
      if (message.error) waiter?.reject(new Error(message.error.message));
      else waiter?.resolve(message.result);
    });
    return channel;
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.browserSession
        .send('Target.sendMessageToTarget', {
          sessionId: this.sessionId,
          message: JSON.stringify({ id, method, params }),
        })
        .catch(reject);
    });
  }

  detach(): Promise<unknown> {
    return this.browserSession.send('Target.detachFromTarget', { sessionId: this.sessionId });
  }
}

interface Profiler {
  start(): Promise<void>;
  stop(): Promise<CpuProfile>;
}

async function pageProfiler(page: Page, intervalUs: number): Promise<Profiler> {
  const session = await page.context().newCDPSession(page);
  return {
    async start() {
      await session.send('Profiler.enable');
      await session.send('Profiler.setSamplingInterval', { interval: intervalUs });
      await session.send('Profiler.start');
    },
    async stop() {
      const { profile } = await session.send('Profiler.stop');
      await session.detach();
      return profile as unknown as CpuProfile;
    },
  };
}

async function workerProfiler(browserSession: CDPSession, target: TargetInfo, intervalUs: number): Promise<Profiler> {
  const channel = await TargetChannel.attach(browserSession, target.targetId);
  return {
    async start() {
      await channel.send('Profiler.enable');
      await channel.send('Profiler.setSamplingInterval', { interval: intervalUs });
      await channel.send('Profiler.start');
    },
    async stop() {
      const { profile } = await channel.send<{ profile: CpuProfile }>('Profiler.stop');
      await channel.detach();
      return profile;
    },
  };
}

/**
 * Profiles `step` in the page ('page') and in the workers whose name (the target title, or a URL
 * containing it) is listed. Returns the profiles by that name and what `step` returned.
 */
export async function profileDuring<T>(
  browser: Browser,
  page: Page,
  names: string[],
  step: () => Promise<T>,
  intervalUs = 200,
): Promise<{ profiles: Map<string, CpuProfile>; value: T }> {
  const browserSession = await browser.newBrowserCDPSession();
  const { targetInfos } = (await browserSession.send('Target.getTargets')) as unknown as { targetInfos: TargetInfo[] };
  const profilers = new Map<string, Profiler>();
  for (const name of names) {
    if (name === 'page') {
      profilers.set(name, await pageProfiler(page, intervalUs));
      continue;
    }
    const optional = name.startsWith('?');
    const wanted = optional ? name.slice(1) : name;
    const target = targetInfos.find(
      (t) => (t.type === 'worker' || t.type === 'service_worker') && (t.title === wanted || t.url.includes(wanted)),
    );
    if (!target && optional) continue;
    if (!target) {
      const seen = targetInfos.map((t) => `${t.type}:${t.title || t.url}`).join(', ');
      throw new Error(`no worker target named ${name} (targets: ${seen})`);
    }
    profilers.set(wanted, await workerProfiler(browserSession, target, intervalUs));
  }
  for (const p of profilers.values()) await p.start();
  const value = await step();
  const profiles = new Map<string, CpuProfile>();
  for (const [name, p] of profilers) profiles.set(name, await p.stop());
  await browserSession.detach();
  return { profiles, value };
}

/** Self time by function (name, file, line), largest first, as printable lines with the share of the whole. */
export function summarizeProfile(profile: CpuProfile, top: number): string[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // A sample's time is the delta to the next sample (the last one gets the average).
  for (let i = 0; i < samples.length; i++) {
    const dt = deltas[i + 1] ?? (profile.endTime - profile.startTime) / Math.max(1, samples.length);
    selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + dt);
  }
  const total = profile.endTime - profile.startTime;
  const byFunction = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    const file = frame.url.split('/').pop() || '';
    const key = `${frame.functionName || '(anonymous)'}${file ? ` ${file}:${frame.lineNumber + 1}` : ''}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  const ranked = [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top);
  return [
    `profile ${(total / 1000).toFixed(0)} ms, self time by function:`,
    ...ranked.map(
      ([key, us]) =>
        `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`,
    ),
  ];
}

import { afterEach, describe, expect, it } from 'vitest';
import { frameEvent } from './sse.js';
import { manualClock, startStandin } from './testing.js';
import type { ManualClock, RunningStandin } from './testing.js';
import type { StandinOptions } from './settings.js';
import * as wallet from './wallet.js';
import type { SessionPackage } from './protocol.js';

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const body = {
  validity: 300,
  request: { '@context': 'https://irma.app/ld/request/disclosure/v2', disclose: [[[{ type: EMAIL, notNull: true }]]] },
};

let running: RunningStandin[] = [];
afterEach(async () => {
  await Promise.all(running.map((r) => r.close()));
  running = [];
});

async function start(options: StandinOptions = {}): Promise<RunningStandin & { clock: ManualClock }> {
  const clock = manualClock();
  const r = await startStandin({ clock, sweepIntervalMs: 0, sseOpenDelayMs: 0, ...options });
  running.push(r);
  return { ...r, clock };
}

async function startSession(r: RunningStandin, extra: object = {}): Promise<SessionPackage> {
  const res = await fetch(`${r.url}/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, ...extra }),
  });
  return (await res.json()) as SessionPackage;
}

/** Reads an event stream chunk by chunk; `until` waits for text to arrive, `rest` reads to the end. */
function reader(res: Response) {
  const r = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  return {
    async until(fragment: string): Promise<string> {
      while (!text.includes(fragment)) {
        const { value, done } = await r.read();
        if (done) throw new Error(`stream ended before ${JSON.stringify(fragment)}; got ${JSON.stringify(text)}`);
        text += decoder.decode(value, { stream: true });
      }
      return text;
    },
    async rest(): Promise<string> {
      for (;;) {
        const { value, done } = await r.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe('server-sent status events', () => {
  it('frames events as go-sse does', () => {
    expect(frameEvent('"DONE"')).toBe('data: "DONE"\n\n');
    expect(frameEvent('', 'open')).toBe('event: open\n\n');
    expect(frameEvent('a\nb')).toBe('data: a\ndata: b\n\n');
  });

  it('streams every status change on the requestor channel in Yivi framing and ends after the final one', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const res = await fetch(`${r.url}/session/${pkg.token}/statusevents`);
    expect(res.status).toBe(200);
    expect(Object.fromEntries(res.headers)).toMatchObject({
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      'access-control-allow-origin': '*',
    });
    const events = reader(res);
    // Nothing about the current status on connect: just the `open` event.
    expect(await events.until('\n\n')).toBe('event: open\n\n');

    await wallet.disclose(pkg.sessionPtr, { [EMAIL]: 'alice@example.org' });
    expect(await events.rest()).toBe('event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n');
  });

  it('serves the wallet channel ({u}/statusevents) and the frontend channel with status objects', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const client = reader(await fetch(`${pkg.sessionPtr.u}/statusevents`));
    const frontendRes = await fetch(`${pkg.sessionPtr.u}/frontend/statusevents`, {
      headers: { authorization: pkg.frontendRequest.authorization },
    });
    const frontend = reader(frontendRes);
    await client.until('event: open');
    await frontend.until('event: open');

    await wallet.cancel(pkg.sessionPtr);
    expect(await client.rest()).toBe('event: open\n\ndata: "CANCELLED"\n\n');
    expect(await frontend.rest()).toBe('event: open\n\ndata: {"status":"CANCELLED"}\n\n');

    const unauthorized = await fetch(`${pkg.sessionPtr.u}/frontend/statusevents`, {
      headers: { authorization: 'nope' },
    });
    expect(unauthorized.status).toBe(403);
  });

  it('pushes TIMEOUT when the deadline passes while someone listens', async () => {
    const r = await start();
    const pkg = await startSession(r, { timeout: 30 });
    const events = reader(await fetch(`${r.url}/session/${pkg.token}/statusevents`));
    await events.until('event: open');
    r.clock.advance(30);
    // Any look at the session (or the periodic sweep) applies the timeout.
    expect(await (await fetch(`${r.url}/session/${pkg.token}/status`)).json()).toBe('TIMEOUT');
    expect(await events.rest()).toBe('event: open\n\ndata: "TIMEOUT"\n\n');
  });

  it('answers finished, unknown and disabled cases with Yivi errors', async () => {
    const r = await start();
    const pkg = await startSession(r);
    await wallet.cancel(pkg.sessionPtr);
    const finished = await fetch(`${r.url}/session/${pkg.token}/statusevents`);
    expect(finished.status).toBe(403);
    expect(await finished.json()).toEqual({
      status: 403,
      error: 'UNEXPECTED_REQUEST',
      description: 'Unexpected request in this state',
      message: "Can't subscribe to server sent events of finished session",
    });
    const unknown = await fetch(`${r.url}/session/${'Q'.repeat(20)}/statusevents`);
    expect(unknown.status).toBe(501);
    expect(await unknown.json()).toEqual({
      status: 501,
      error: 'UNSUPPORTED',
      description: 'Unsupported by this server',
    });

    const off = await start({ sse: false });
    const pkg2 = await startSession(off);
    const disabled = await fetch(`${off.url}/session/${pkg2.token}/statusevents`);
    expect(disabled.status).toBe(500);
    expect(await disabled.text()).toBe(
      '{"status":500,"error":"SSE_DISABLED","description":"Server sent events disabled"}',
    );
  });

  it('ends open streams when the server closes instead of hanging', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const events = reader(await fetch(`${r.url}/session/${pkg.token}/statusevents`));
    await events.until('event: open');
    await r.close();
    running = running.filter((x) => x !== r);
    expect(await events.rest()).toBe('event: open\n\n');
  });
});

import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { chromium } from '@playwright/test';
import type { Browser, Page } from '@playwright/test';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandin } from './testing.js';
import type { RunningStandin } from './testing.js';
import type { SessionPackage } from './protocol.js';
import { chromiumLaunchOptions } from '../../test/chromium.js';

/**
 * wallet.ts is meant to run in a browser page too (the demo's wallet simulator). Here it runs in
 * Chromium, loaded as plain ES modules from another origin than the stand-in, so every call is a
 * real cross-origin fetch with CORS preflights for the wallet headers.
 */

const MODULES = ['wallet', 'protocol', 'tokens'];
const EMAIL = 'irma-demo.sidn-pbdf.email.email';

let standin: RunningStandin;
let pageServer: Server;
let pageOrigin: string;
let browser: Browser;

async function transpiled(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of MODULES) {
    const source = await readFile(new URL(`./${name}.ts`, import.meta.url), 'utf8');
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
    }).outputText;
    out.set(`/${name}.js`, js);
  }
  return out;
}

beforeAll(async () => {
  standin = await startStandin({ sweepIntervalMs: 0 });
  const files = await transpiled();
  pageServer = createServer((req, res) => {
    const js = files.get(req.url ?? '');
    if (js !== undefined) {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
    } else {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          '<!doctype html><title>wallet</title><script type="module">import * as w from "/wallet.js"; window.wallet = w;</script>',
        );
    }
  });
  await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  const address = pageServer.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  // "localhost" versus the stand-in's "127.0.0.1": a different origin, so CORS applies.
  pageOrigin = `http://localhost:${address.port}`;
  browser = await chromium.launch(chromiumLaunchOptions);
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => pageServer?.close(resolve));
  await standin?.close();
});

async function startSession(): Promise<SessionPackage> {
  const res = await fetch(`${standin.url}/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      validity: 300,
      request: {
        '@context': 'https://irma.app/ld/request/disclosure/v2',
        disclose: [[[{ type: EMAIL, value: 'alice@example.org', notNull: true }]]],
      },
    }),
  });
  return (await res.json()) as SessionPackage;
}

type WalletModule = typeof import('./wallet.js');

async function open(page: Page): Promise<void> {
  await page.goto(`${pageOrigin}/`);
  await page.waitForFunction(() => 'wallet' in window);
}

const status = async (token: string) =>
  (await (await fetch(`${standin.url}/session/${token}/status`)).json()) as string;

describe('the simulated wallet in a browser', () => {
  it('reads a Yivi QR link and discloses cross-origin', async () => {
    const pkg = await startSession();
    const qr = `https://open.yivi.app/-/session#${encodeURIComponent(JSON.stringify({ ...pkg.sessionPtr, continueOnSecondDevice: true }))}`;
    const page = await browser.newPage();
    try {
      await open(page);
      const report = await page.evaluate(
        async ([qrText, attribute]) => {
          const w = (window as unknown as { wallet: WalletModule }).wallet;
          return w.disclose(qrText!, { [attribute!]: 'alice@example.org' });
        },
        [qr, EMAIL],
      );
      expect(report.proofStatus).toBe('VALID');
      expect(report.disclosed).toEqual([[{ id: EMAIL, rawvalue: 'alice@example.org' }]]);
      expect(await status(pkg.token)).toBe('DONE');
    } finally {
      await page.close();
    }
  });

  it('cancels, and reports Yivi errors as WalletError', async () => {
    const pkg = await startSession();
    const page = await browser.newPage();
    try {
      await open(page);
      const outcome = await page.evaluate(async (pointer) => {
        const w = (window as unknown as { wallet: WalletModule }).wallet;
        await w.cancel(pointer);
        try {
          await w.disclose(pointer, {});
          return 'disclosed';
        } catch (e) {
          const err = e as InstanceType<typeof w.WalletError>;
          return { name: err.name, code: err.code, status: err.status, error: err.remote?.error };
        }
      }, pkg.sessionPtr);
      expect(outcome).toEqual({ name: 'WalletError', code: 'REMOTE', status: 403, error: 'UNEXPECTED_REQUEST' });
      expect(await status(pkg.token)).toBe('CANCELLED');
    } finally {
      await page.close();
    }
  });

  it('the wallet page loads without a failed request, and names an icon (the favicon request was a 404)', async () => {
    const page = await browser.newPage();
    const failed: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
    });
    try {
      await page.goto(`${standin.url}/standin/wallet`);
      await expect.poll(() => page.title()).toBe('Stand-in wallet');
      // A headed browser asks the origin for /favicon.ico unless the page names an icon; this one
      // names one that needs no request (headless Chromium never asks, so the link is checked).
      const icon = await page.evaluate(() => document.querySelector<HTMLLinkElement>('link[rel=icon]')?.href);
      expect(icon).toMatch(/^data:/);
      expect(failed).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from '@playwright/test';
import { chromiumLaunchOptions } from '../../test/chromium.js';

/**
 * One way to drive a page in Chromium, Firefox ESR and WebKitGTK, so that a test body runs
 * unchanged on every engine (e2e/engines/*.spec.ts). Playwright drives only Chromium here (its
 * Firefox and WebKit builds cannot be downloaded, and its BiDi client does not speak to Debian's
 * Firefox), so:
 *
 *   chromium  Playwright, /usr/bin/chromium
 *   firefox   puppeteer-core over WebDriver BiDi, /usr/bin/firefox-esr
 *   webkit    selenium-webdriver against WebKitWebDriver driving MiniBrowser, under xvfb-run
 *
 * The surface is deliberately small: navigate, run a function in the page (arguments and result
 * cross as JSON), resize, screenshot, and a download folder per browser. Everything a test does in
 * a page it does through page-side code (window.pgt in the worker test app, DOM helpers for the
 * demo), which is the same on every engine.
 */

export type Engine = 'chromium' | 'firefox' | 'webkit';
export const ENGINES: readonly Engine[] = ['chromium', 'firefox', 'webkit'];

export interface EnginePage {
  goto(url: string): Promise<void>;
  /** Runs `fn(arg)` in the page and resolves with its (awaited, JSON-cloned) result. */
  evaluate<R, A = undefined>(fn: (arg: A) => R | Promise<R>, arg?: A): Promise<Awaited<R>>;
  setViewport(width: number, height: number): Promise<void>;
  screenshot(path: string): Promise<void>;
  close(): Promise<void>;
  /**
   * Chromium only: starts recording the page's requests that the network panel would show as
   * cancelled (CDP `Network.loadingFailed` with `canceled`), for a check that finished requests are
   * never aborted.
   */
  watchCancelled?(): Promise<CancelledRequests>;
}

/** Requests a page cancelled, as the DevTools network panel lists them. */
export interface CancelledRequests {
  /** `METHOD url` of each cancelled request so far. */
  list(): string[];
  stop(): Promise<void>;
}

export interface EngineBrowser {
  engine: Engine;
  /** Where this browser saves downloads (a fresh directory, removed on close). */
  downloads: string;
  /** A new tab (for a second page: the wallet simulator). The first call reuses the initial tab. */
  newPage(): Promise<EnginePage>;
  close(): Promise<void>;
}

const LONG = 10 * 60_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** `fn` as page-side source that settles a callback with {ok} or {error}: the shape every driver returns. */
function wrapped(fn: (arg: never) => unknown): string {
  return `(${fn.toString()})`;
}

async function launchChromium(downloads: string): Promise<EngineBrowser> {
  // Precise performance.memory: by default Chromium rounds the heap size and refreshes it only now
  // and then, so a page's heap measure (the keeper spec) could miss most of a 64 MiB peak.
  const browser = await chromium.launch({
    ...chromiumLaunchOptions,
    args: [...(chromiumLaunchOptions.args ?? []), '--enable-precise-memory-info'],
    downloadsPath: downloads,
  });
  const context = await browser.newContext({ acceptDownloads: true });
  // Playwright names downloads by GUID; the engine's own behaviour (and the file name) is what we
  // test, so hand downloads back to Chromium's download manager through CDP.
  const pages: EnginePage[] = [];
  const browserCdp = await browser.newBrowserCDPSession();
  let behaviourSet = false;
  const wrap = async (): Promise<EnginePage> => {
    const page = await context.newPage();
    if (!behaviourSet) {
      const { targetInfos } = await browserCdp.send('Target.getTargets');
      const contextId = targetInfos.find((t) => t.type === 'page')?.browserContextId;
      await browserCdp.send('Browser.setDownloadBehavior', {
        behavior: 'allow',
        downloadPath: downloads,
        ...(contextId ? { browserContextId: contextId } : {}),
      });
      behaviourSet = true;
    }
    const p: EnginePage = {
      goto: async (url) => void (await page.goto(url, { timeout: LONG })),
      evaluate: (fn, arg) => page.evaluate(fn as never, arg) as never,
      setViewport: (width, height) => page.setViewportSize({ width, height }),
      screenshot: async (path) => void (await page.screenshot({ path, fullPage: true })),
      close: () => page.close(),
      watchCancelled: async () => {
        const cdp = await context.newCDPSession(page);
        const requests = new Map<string, string>();
        const cancelled: string[] = [];
        cdp.on('Network.requestWillBeSent', ({ requestId, request }) =>
          requests.set(requestId, `${request.method} ${request.url}`),
        );
        cdp.on('Network.loadingFailed', ({ requestId, canceled }) => {
          if (canceled === true) cancelled.push(requests.get(requestId) ?? requestId);
        });
        await cdp.send('Network.enable');
        return { list: () => [...cancelled], stop: () => cdp.detach() };
      },
    };
    pages.push(p);
    return p;
  };
  return {
    engine: 'chromium',
    downloads,
    newPage: wrap,
    close: async () => {
      await browser.close();
      await rm(downloads, { recursive: true, force: true });
    },
  };
}

async function launchFirefox(downloads: string): Promise<EngineBrowser> {
  const puppeteer = (await import('puppeteer-core')).default;
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.FIREFOX ?? '/usr/bin/firefox-esr',
    headless: true,
    protocolTimeout: LONG,
    extraPrefsFirefox: {
      'browser.download.folderList': 2,
      'browser.download.dir': downloads,
      'browser.download.useDownloadDir': true,
      'browser.download.always_ask_before_handling_new_types': false,
      'browser.download.start_downloads_in_tmp_dir': false,
      'browser.download.alwaysOpenPanel': false,
      'browser.download.panel.shown': true,
    },
  });
  let first = (await browser.pages())[0];
  return {
    engine: 'firefox',
    downloads,
    newPage: async () => {
      const page = first ?? (await browser.newPage());
      first = undefined;
      page.setDefaultTimeout(LONG);
      page.setDefaultNavigationTimeout(LONG);
      return {
        goto: async (url) => void (await page.goto(url)),
        evaluate: (fn, arg) => page.evaluate(fn as never, arg as never) as never,
        setViewport: (width, height) => page.setViewport({ width, height }),
        screenshot: async (path) => void (await page.screenshot({ path: path as `${string}.png`, fullPage: true })),
        close: () => page.close(),
      };
    },
    close: async () => {
      await browser.close();
      await rm(downloads, { recursive: true, force: true });
    },
  };
}

async function launchWebKit(downloads: string): Promise<EngineBrowser> {
  const { Builder } = await import('selenium-webdriver');
  // MiniBrowser saves downloads to the XDG download folder of the HOME it sees.
  const home = await mkdtemp(join(tmpdir(), 'pg-webkit-home-'));
  await mkdir(join(home, '.config'), { recursive: true });
  await writeFile(join(home, '.config', 'user-dirs.dirs'), `XDG_DOWNLOAD_DIR="${downloads}"\n`);
  const port = await freePort();
  // MiniBrowser has no working headless mode: a virtual display for it.
  const driverProcess: ChildProcess = spawn(
    'xvfb-run',
    ['-a', process.env.WEBKIT_DRIVER ?? '/usr/bin/WebKitWebDriver', `--port=${port}`],
    {
      env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config') },
      stdio: 'ignore',
      detached: true,
    },
  );
  const stopDriver = () => {
    try {
      if (driverProcess.pid !== undefined) process.kill(-driverProcess.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  };
  const server = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${server}/status`)).ok) break;
    } catch {
      if (i > 100) {
        stopDriver();
        throw new Error('WebKitWebDriver did not start');
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const driver = await new Builder()
    .usingServer(server)
    .withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': {
        binary: process.env.WEBKIT_BROWSER ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser',
        args: ['--automation'],
      },
    })
    .build();
  await driver.manage().setTimeouts({ script: LONG, pageLoad: LONG });
  const firstHandle = await driver.getWindowHandle();
  let firstFree = true;
  return {
    engine: 'webkit',
    downloads,
    newPage: async () => {
      let handle = firstHandle;
      if (!firstFree) {
        await driver.switchTo().newWindow('tab');
        handle = await driver.getWindowHandle();
      }
      firstFree = false;
      // One session drives every tab: switch before each command.
      const on = async () => {
        if ((await driver.getWindowHandle()) !== handle) await driver.switchTo().window(handle);
      };
      return {
        goto: async (url) => {
          await on();
          await driver.get(url);
        },
        evaluate: async (fn, arg) => {
          await on();
          const result = (await driver.executeAsyncScript(
            `const done = arguments[arguments.length - 1];
             Promise.resolve().then(() => ${wrapped(fn as never)}(arguments[0]))
               .then((ok) => done({ ok: ok === undefined ? null : ok }), (e) => done({ error: String(e) + (e && e.stack ? '\\n' + e.stack : '') }));`,
            arg ?? null,
          )) as { ok?: unknown; error?: string };
          if (result.error !== undefined) throw new Error(`in the page: ${result.error}`);
          return (result.ok === null ? undefined : result.ok) as never;
        },
        setViewport: async (width, height) => {
          await on();
          await driver.manage().window().setRect({ width, height });
        },
        screenshot: async (path) => {
          await on();
          await writeFile(path, Buffer.from(await driver.takeScreenshot(), 'base64'));
        },
        close: async () => {
          await on();
          await driver.close();
          const left = await driver.getAllWindowHandles();
          if (left[0] !== undefined) await driver.switchTo().window(left[0]);
        },
      };
    },
    close: async () => {
      await driver.quit().catch(() => undefined);
      stopDriver();
      await rm(home, { recursive: true, force: true });
      await rm(downloads, { recursive: true, force: true });
    },
  };
}

/** The programs each engine needs, with where they come from. */
const NEEDS: Record<Engine, Array<[string, string]>> = {
  chromium: [[process.env.CHROMIUM ?? '/usr/bin/chromium', 'apt-get install -y chromium']],
  firefox: [[process.env.FIREFOX ?? '/usr/bin/firefox-esr', 'apt-get install -y firefox-esr']],
  webkit: [
    [process.env.WEBKIT_DRIVER ?? '/usr/bin/WebKitWebDriver', 'apt-get install -y webkit2gtk-driver'],
    ['/usr/bin/xvfb-run', 'apt-get install -y xvfb'],
  ],
};

export async function launch(engine: Engine): Promise<EngineBrowser> {
  for (const [program, install] of NEEDS[engine]) {
    await access(program, constants.X_OK).catch(() => {
      throw new Error(`${engine}: ${program} is missing (${install}; .ci/run installs it)`);
    });
  }
  const downloads = await mkdtemp(join(tmpdir(), `pg-downloads-${engine}-`));
  switch (engine) {
    case 'chromium':
      return launchChromium(downloads);
    case 'firefox':
      return launchFirefox(downloads);
    case 'webkit':
      return launchWebKit(downloads);
  }
}

/** Empties a download folder (between tests: a browser renames a download whose name is taken). */
export async function clearDownloads(dir: string): Promise<void> {
  for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true, force: true });
}

/** The files in a download folder with their sizes (name → bytes). */
export async function listDownloads(dir: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of await readdir(dir)) {
    // A browser may rename or remove a file between the listing and its stat (a .crdownload).
    const size = await stat(join(dir, name)).then(
      (s) => s.size,
      () => undefined,
    );
    if (size !== undefined) out[name] = size;
  }
  return out;
}

/**
 * Waits until a download folder stops changing (the same names and sizes twice, `quietMs` apart):
 * a failed download may leave an in-progress name (.part) for good. Resolves with the listing.
 */
export async function settledDownloads(
  dir: string,
  quietMs = 1500,
  timeoutMs = 60_000,
): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const now = await listDownloads(dir);
    const key = JSON.stringify(now);
    if (key === last) return now;
    if (Date.now() > deadline) return now;
    last = key;
    await new Promise((resolve) => setTimeout(resolve, quietMs));
  }
}

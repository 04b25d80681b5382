import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { disclose } from '../../devtools/standin/wallet.js';
import type { Stack } from '../fixtures.js';
import { layout, sealInNode } from '../sealing.js';
import { clearDownloads, listDownloads, settledDownloads } from './driver.js';
import { expect, test, until, type EnginePage } from './fixtures.js';

/**
 * The demo on every engine, at desktop and phone width: a person encrypts a message for Bob
 * (signing with Yivi), Bob opens the .enc on the decrypt page (a QR session), previews it and
 * saves it; a damaged file never becomes a download. The wallet is the stand-in's, played from
 * Node with the session pointer the page shows. Page actions go through DOM helpers installed in
 * the page (the same code on every engine); each state is checked for sideways overflow and
 * unlabelled controls, and screenshotted into the report.
 */

const BOB = 'bob@example.com';
const ALICE = 'alice@example.org';
const EMAIL = 'pbdf.sidn-pbdf.email.email';

/** Helpers the test calls in the page as window.dom.*: find controls the way a person names them. */
function installDom(): void {
  const visible = (el: Element | null): boolean =>
    el !== null && el.getClientRects().length > 0 && !el.closest('[hidden]');
  const byLabel = (text: string): HTMLInputElement => {
    // A label's text is its name, or begins with it (some carry a note after it).
    for (const label of Array.from(document.querySelectorAll('label'))) {
      const name = (label.textContent ?? '').replace(/\s+/g, ' ').trim();
      if (name !== text && !name.startsWith(`${text} `) && !name.startsWith(`${text}(`)) continue;
      const control = (label.control ?? label.querySelector('input, select, textarea')) as HTMLInputElement | null;
      if (control) return control;
    }
    throw new Error(`no control labelled "${text}"`);
  };
  const button = (name: string): HTMLButtonElement => {
    const found = Array.from(document.querySelectorAll('button')).find(
      (b) => (b.textContent ?? '').trim() === name && visible(b),
    );
    if (!found) throw new Error(`no visible button "${name}"`);
    return found;
  };
  const dom = {
    fill(label: string, value: string) {
      const control = byLabel(label);
      control.value = value;
      control.dispatchEvent(new Event('input', { bubbles: true }));
      control.dispatchEvent(new Event('change', { bubbles: true }));
    },
    check(label: string, on = true) {
      const control = byLabel(label);
      if (control.checked !== on) control.click();
    },
    click(name: string) {
      button(name).click();
    },
    setFile(selector: string, name: string, b64: string) {
      const input = document.querySelector<HTMLInputElement>(selector)!;
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], name, { type: 'application/octet-stream' }));
      input.files = transfer.files;
      input.dispatchEvent(new Event('change', { bubbles: true }));
    },
    shown: (selector: string) => visible(document.querySelector(selector)),
    text: (selector: string) => (document.querySelector(selector) as HTMLElement | null)?.innerText ?? '',
    attr: (selector: string, name: string) => document.querySelector(selector)?.getAttribute(name) ?? null,
    sameDeviceLink: () =>
      Array.from(document.querySelectorAll('a')).find(
        (a) => a.textContent?.trim() === 'Open the Yivi app on this device' && visible(a),
      )?.href,
    /** What a person would notice first: content wider than the screen, controls without a label. */
    layoutProblems() {
      const overflow = document.documentElement.scrollWidth - window.innerWidth;
      const unlabelled = Array.from(document.querySelectorAll<HTMLInputElement>('input, select, textarea'))
        .filter((el) => el.type !== 'hidden' && visible(el))
        .filter((el) => (el.labels?.length ?? 0) === 0 && !el.getAttribute('aria-label'))
        .map((el) => el.outerHTML);
      return { overflow, unlabelled };
    },
  };
  (window as unknown as { dom: typeof dom }).dom = dom;
}
type Dom = {
  fill(label: string, value: string): void;
  check(label: string, on?: boolean): void;
  click(name: string): void;
  setFile(selector: string, name: string, b64: string): void;
  shown(selector: string): boolean;
  text(selector: string): string;
  attr(selector: string, name: string): string | null;
  sameDeviceLink(): string | undefined;
  layoutProblems(): { overflow: number; unlabelled: string[] };
};
declare const dom: Dom;

async function open(tab: EnginePage, stack: Stack, which: 'encrypt' | 'decrypt'): Promise<void> {
  await tab.goto(`${stack.demoUrl}${which === 'encrypt' ? '' : 'decrypt.html'}`);
  await until(() => tab.evaluate(() => document.body.dataset.ready === 'true'), 'the demo page to be ready', 60_000);
  expect(await tab.evaluate(() => document.body.dataset.serviceWorker)).toBe('true');
  await tab.evaluate(installDom);
}

/** Plays the phone: discloses `values` to the session whose same-device link the page shows. */
async function scan(tab: EnginePage, values: Record<string, string>): Promise<void> {
  const link = await until(() => tab.evaluate(() => dom.sameDeviceLink()), 'a Yivi session on the page');
  const report = await disclose(link, values);
  expect(report.proofStatus).toBe('VALID');
}

async function check(tab: EnginePage, name: string): Promise<void> {
  await tab.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  const problems = await tab.evaluate(() => dom.layoutProblems());
  expect(problems.overflow, `${name}: content wider than the viewport`).toBeLessThanOrEqual(0);
  expect(problems.unlabelled, `${name}: controls without a label`).toEqual([]);
  const path = test.info().outputPath(`${name}.png`);
  await tab.screenshot(path);
  await test.info().attach(name, { path, contentType: 'image/png' });
}

/** Waits for the outcome region or the error alert; fails with the alert's text if that came. */
async function settled(tab: EnginePage, outcome: string): Promise<void> {
  const which = await until(
    () => tab.evaluate((o) => (dom.shown('#error') ? 'error' : dom.shown(o) ? 'ok' : undefined), outcome),
    `${outcome} or an error`,
    120_000,
  );
  if (which === 'error') throw new Error(`the page shows an error: ${await tab.evaluate(() => dom.text('#error'))}`);
}

for (const viewport of [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const) {
  test(`at ${viewport.name} width: a message encrypted for Bob, opened with a QR session, previewed and saved; a damaged file is refused`, async ({
    tab,
    stack,
    browserOf,
    engine,
  }) => {
    await clearDownloads(browserOf.downloads);
    await tab.setViewport(viewport.width, viewport.height);
    // MiniBrowser's window cannot be narrower than its toolbar: WebKit's "phone" is 447 CSS px wide.
    const width = await tab.evaluate(() => window.innerWidth);
    test.info().annotations.push({ type: 'viewport width', description: `${width}px` });
    expect(width).toBe(engine === 'webkit' ? Math.max(viewport.width, 447) : viewport.width);
    const text = `Hello Bob,\nthe meeting moved to Thursday (${viewport.name}). — Alice\n`;
    const shot = (what: string) => check(tab, `${engine}-${viewport.name}-${what}`);

    // Encrypt: form, Yivi for the sender, the .enc saved by the browser.
    await open(tab, stack, 'encrypt');
    await shot('encrypt-empty');
    // No API key in a page: the sender proves who they are with Yivi, and organisations are sent to the SDK.
    expect(await tab.evaluate(() => document.querySelector('input[type=password], input[name=signer]') === null)).toBe(
      true,
    );
    expect(await tab.evaluate(() => dom.text('#organisation-note'))).toContain('@postguard-ts/sdk');
    await tab.evaluate(
      ([bob, alice, t]) => {
        dom.fill('Recipient e-mail address', bob);
        dom.check('A message');
        dom.fill('Message', t);
        dom.fill('Your e-mail address', alice);
        dom.check('Also sign with my mobile number', false);
      },
      [BOB, ALICE, text] as const,
    );
    await shot('encrypt-filled');
    await tab.evaluate(() => dom.click('Encrypt and download'));
    await until(() => tab.evaluate(() => dom.shown('.session .qr svg')), 'the QR code');
    await shot('encrypt-scan');
    await scan(tab, { [EMAIL]: ALICE });
    await settled(tab, '#result');
    expect(await tab.evaluate(() => dom.text('#result'))).toContain('Encrypted');
    const encName = 'message.txt.enc';
    await until(
      async () => {
        const now = await settledDownloads(browserOf.downloads, 500);
        return (now[encName] ?? 0) > 0;
      },
      `${encName} on disk`,
      60_000,
    );
    const sealed = await readFile(join(browserOf.downloads, encName));

    // Decrypt: pick the file, prove to be Bob, preview, save.
    await open(tab, stack, 'decrypt');
    await shot('decrypt-empty');
    await tab.evaluate(([b64]) => dom.setFile('#enc-file', 'message.txt.enc', b64), [
      sealed.toString('base64'),
    ] as const);
    await until(() => tab.evaluate(() => dom.shown('#file-info')), 'the file header');
    expect(await tab.evaluate(() => dom.text('#sender'))).toContain(`E-mail address: ${ALICE}`);
    await shot('decrypt-file');
    await tab.evaluate(() => {
      dom.check('Remember my key', false);
      dom.click('Get my key with Yivi');
    });
    await scan(tab, { [EMAIL]: BOB });
    await settled(tab, '#open');
    await tab.evaluate(() => dom.click('Preview'));
    await until(() => tab.evaluate(() => dom.shown('#preview-area pre')), 'the preview');
    expect(await tab.evaluate(() => document.querySelector('#preview-area pre')!.textContent)).toBe(text);
    expect(await tab.evaluate(() => dom.text('#verified'))).toContain(`E-mail address: ${ALICE}`);
    await shot('decrypt-preview');
    await tab.evaluate(() => dom.click('Download'));
    await until(
      async () => (await listDownloads(browserOf.downloads))['message.txt'] === Buffer.byteLength(text),
      'message.txt on disk',
      60_000,
    );
    expect(await readFile(join(browserOf.downloads, 'message.txt'), 'utf8')).toBe(text);

    // A file changed in its second segment: refused before any byte, nothing saved, the page says why.
    const damaged = await sealInNode(stack, [BOB], ALICE, randomBytes(600_000));
    damaged[layout(damaged).framing + layout(damaged).segment + 10]! ^= 1;
    const listing = await listDownloads(browserOf.downloads);
    await tab.evaluate(([b64]) => dom.setFile('#enc-file', 'report.pdf.enc', b64), [
      Buffer.from(damaged).toString('base64'),
    ] as const);
    await until(() => tab.evaluate(() => dom.shown('#file-info')), 'the damaged file header');
    await tab.evaluate(() => dom.click('Get my key with Yivi'));
    await scan(tab, { [EMAIL]: BOB });
    await settled(tab, '#open');
    await tab.evaluate(() => dom.click('Download'));
    await until(() => tab.evaluate(() => dom.shown('#error')), 'the error');
    expect(await tab.evaluate(() => dom.attr('#error', 'data-code'))).toBe('TAMPERED');
    expect(await tab.evaluate(() => dom.text('#error'))).toContain('changed after it was encrypted');
    await shot('decrypt-tampered');
    expect(await settledDownloads(browserOf.downloads)).toEqual(listing);
  });
}

import { disclose } from '../../devtools/standin/wallet.js';
import {
  ALICE,
  ATTACKERS,
  BOB,
  EMAIL,
  FILE_KINDS,
  MALLORY,
  buildThreatModel,
  type Attacker,
  type FileKind,
  type ThreatModel,
  type ThreatRow,
} from '../../test/threat-model.js';
import { expect, test as base, until, type EnginePage } from './fixtures.js';

/**
 * docs/security.md's threat model through the demo's decrypt page, on every engine: each
 * attacker's best forgery of each kind of file (test/threat-model.ts, built in Node under the
 * stack's master keys), opened as Bob would open it. The page must say exactly what the document
 * says: the claimed sender before any key, then the sender in the document's words once the file
 * was decrypted to its end, or the document's error. The expected words below are copied from the
 * document, not computed with lib/sender.ts, so the page is checked against the document.
 *
 * One page per attacker, one file after another; Bob's key comes from one QR session per engine
 * and is remembered by the page ("Remember my key"), so every later row opens from the cache.
 */

// docs/security.md, "The words people see".
const VERIFIED = 'Verified sender';
const CONTENT_SIGNER = 'Content signed by';
const HEADER_CLAIM = 'Claimed in the signed header (not part of the content signature)';
const OLDER_HEADER_CLAIM = 'Signed header, older format (not part of the content signature)';
const OLDER_FORMAT = 'Signed header, older format';
const CLAIMED = 'Claimed sender';
const DEMO_NOTE = 'Demo credentials: anyone can issue these to themselves, so they prove nothing about a person.';

// The identities as the demo lists them (demo/src/attributes.ts): "<attribute label>: <value>",
// a demo-scheme e-mail labelled "E-mail address (demo credential)".
const alice = `E-mail address: ${ALICE}`;
const aliceDemo = `E-mail address (demo credential): ${ALICE}`;
const mallory = `E-mail address: ${MALLORY}`;
const over18 = 'over18: yes';

// docs/security.md's error wording (demo/src/messages.ts).
const ERROR_TITLES: Record<string, string> = {
  BAD_SIGNATURE: "The sender's signature does not verify.",
  SENDER_MISMATCH: 'The sender named on this file is not the one who sealed it.',
  TRUNCATED: 'This file is incomplete: it ends before the encrypted data does.',
};

type Standing = 'verified' | 'content-signer' | 'older-format';
/** What the page shows for a row: an error, or a sender headline with its lines. */
type Shows =
  | { error: 'BAD_SIGNATURE' | 'SENDER_MISMATCH' | 'TRUNCATED' }
  | { headline: string; standing: Standing; lines: Array<[label: string, identity: string]> };

/** The public identity of a genuine file of this kind, as listed. */
const sender = (kind: FileKind) => (kind === 'demo-sender' ? aliceDemo : alice);

const verified = (id: string): Shows => ({ headline: VERIFIED, standing: 'verified', lines: [[VERIFIED, id]] });
const olderFormat = (id: string): Shows => ({
  headline: OLDER_FORMAT,
  standing: 'older-format',
  lines: [[OLDER_FORMAT, id]],
});
/** "Content signed by: <signer>; then <header label>: <public>". */
const contentSigner = (signer: string, headerLabel: string, id: string): Shows => ({
  headline: CONTENT_SIGNER,
  standing: 'content-signer',
  lines: [
    [CONTENT_SIGNER, signer],
    [headerLabel, id],
  ],
});

/** The table's last column, row by row. */
function shows(attacker: Attacker, kind: FileKind): Shows {
  switch (attacker) {
    case 'outsider':
      return { error: 'BAD_SIGNATURE' };
    case 'outsider-with-key':
      if (kind === 'unbound') return contentSigner(alice, OLDER_HEADER_CLAIM, mallory);
      if (kind === 'unbound-private') return contentSigner(over18, OLDER_HEADER_CLAIM, mallory);
      return { error: 'SENDER_MISMATCH' };
    case 'co-recipient':
      return contentSigner(over18, HEADER_CLAIM, sender(kind));
    case 'pkg-operator':
      if (kind === 'unbound') return olderFormat(alice);
      if (kind === 'unbound-private') return contentSigner(over18, OLDER_HEADER_CLAIM, alice);
      if (kind === 'bound') return verified(alice);
      if (kind === 'bound-private') return contentSigner(over18, HEADER_CLAIM, alice);
      return verified(aliceDemo);
    case 'storage-operator':
      return { error: 'TRUNCATED' };
  }
}

/** "Before unsealing every row shows `Claimed sender:` and the header's identity." */
const claimedBy = (attacker: Attacker, kind: FileKind) => (attacker === 'outsider-with-key' ? mallory : sender(kind));

/** What a sender region shows, read from the DOM: the badge, each label with its identities, the note. */
interface SenderShown {
  badges: Array<{ text: string; standing: string | null }>;
  lines: Array<{ label: string; identity: string[] }>;
  note: string | null;
  /** The region's rendered text, whitespace collapsed. */
  text: string;
}

/** Page-side helpers (window.tm), the same code on every engine. */
function installHelpers(): void {
  const norm = (s: string | null | undefined) => (s ?? '').replace(/\s+/g, ' ').trim();
  const shown = (selector: string) => {
    const el = document.querySelector(selector);
    return el !== null && el.getClientRects().length > 0 && el.closest('[hidden]') === null;
  };
  const tm = {
    shown,
    setFile(name: string, b64: string) {
      const input = document.querySelector<HTMLInputElement>('#enc-file')!;
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], name, { type: 'application/octet-stream' }));
      input.files = transfer.files;
      input.dispatchEvent(new Event('change', { bubbles: true }));
    },
    remember() {
      const box = document.querySelector<HTMLInputElement>('#remember')!;
      if (!box.checked) box.click();
      return box.checked;
    },
    chooseRecipient(id: string) {
      const radio = Array.from(document.querySelectorAll<HTMLInputElement>('input[name=recipient]')).find(
        (r) => r.value === id,
      );
      if (radio === undefined) throw new Error(`no recipient ${id}`);
      radio.click();
      return radio.checked;
    },
    click(selector: string) {
      document.querySelector<HTMLButtonElement>(selector)!.click();
    },
    sessionLink: () =>
      Array.from(document.querySelectorAll('a')).find(
        (a) => a.textContent?.trim() === 'Open the Yivi app on this device' && a.closest('[hidden]') === null,
      )?.href,
    attr: (selector: string, name: string) => document.querySelector(selector)?.getAttribute(name) ?? null,
    sender(selector: string) {
      const root = document.querySelector<HTMLElement>(selector)!;
      const note = root.querySelector('.demo-credentials');
      return {
        badges: Array.from(root.querySelectorAll('.badge')).map((b) => ({
          text: norm(b.textContent),
          standing: b.getAttribute('data-standing'),
        })),
        lines: Array.from(root.querySelectorAll('p.sender-label')).map((p) => {
          const list = p.nextElementSibling;
          return {
            label: norm(p.textContent),
            identity:
              list !== null && list.matches('ul.identity')
                ? Array.from(list.querySelectorAll('li')).map((li) => norm(li.textContent))
                : [],
          };
        }),
        note: note === null ? null : norm(note.textContent),
        text: norm(root.innerText),
      };
    },
    error: () => {
      const region = document.querySelector<HTMLElement>('#error')!;
      return { code: region.dataset['code'] ?? null, title: norm(region.querySelector('.error-title')?.textContent) };
    },
    /** Everything a person can read on the page (hidden regions excluded). */
    visibleText: () => document.body.innerText,
    overflow: () => document.documentElement.scrollWidth - window.innerWidth,
  };
  (window as unknown as { tm: typeof tm }).tm = tm;
}
type Tm = {
  shown(selector: string): boolean;
  setFile(name: string, b64: string): void;
  remember(): boolean;
  chooseRecipient(id: string): boolean;
  click(selector: string): void;
  sessionLink(): string | undefined;
  attr(selector: string, name: string): string | null;
  sender(selector: string): SenderShown;
  error(): { code: string | null; title: string };
  visibleText(): string;
  overflow(): number;
};
declare const tm: Tm;

const test = base.extend<object, { model: ThreatModel }>({
  // The rows, once per worker, under the stack's master keys and a timestamp the PKG has seen.
  model: [
    async ({ stack }, use) => use(await buildThreatModel(stack.keys, Math.floor(Date.now() / 1000) - 5)),
    { scope: 'worker', timeout: 120_000 },
  ],
});

/** Whether this worker's page already holds Bob's key (one QR session per engine). */
let keyRemembered = false;

async function openDecryptPage(tab: EnginePage, demoUrl: string): Promise<void> {
  await tab.goto(`${demoUrl}decrypt.html`);
  await until(() => tab.evaluate(() => document.body.dataset['ready'] === 'true'), 'the decrypt page', 60_000);
  expect(await tab.evaluate(() => document.body.dataset['serviceWorker'])).toBe('true');
  await tab.evaluate(installHelpers);
  expect(await tab.evaluate(() => tm.remember())).toBe(true);
}

/** Waits for `selector` or the error alert; says which. */
const outcome = (tab: EnginePage, selector: string, what: string) =>
  until(
    () => tab.evaluate((s) => (tm.shown('#error') ? 'error' : tm.shown(s) ? 'shown' : undefined), selector),
    what,
    60_000,
  );

async function noOverflow(tab: EnginePage, where: string): Promise<void> {
  await tab.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  expect(await tab.evaluate(() => tm.overflow()), `${where}: content wider than the viewport`).toBeLessThanOrEqual(0);
}

/** Checks a sender region against the document: one badge, then each label with its identity, the note. */
function expectSender(
  shown: SenderShown,
  where: string,
  headline: string,
  standing: string,
  lines: Array<[string, string]>,
  note: boolean,
): void {
  expect(shown.badges, `${where}: the badge`).toEqual([{ text: headline, standing }]);
  expect(shown.lines, `${where}: the labels and identities`).toEqual(
    lines.map(([label, identity]) => ({ label: `${label}:`, identity: [identity] })),
  );
  expect(shown.note, `${where}: the demo-credential note`).toBe(note ? DEMO_NOTE : null);
  // And as rendered (innerText: what is on screen): each label followed by its identity, in order,
  // then the note.
  const rendered = lines.map(([label, identity]) => `${label}: ${identity}`).join(' ');
  expect(shown.text, `${where}: the rendered text`).toContain(note ? `${rendered} ${DEMO_NOTE}` : rendered);
}

async function checkRow(tab: EnginePage, row: ThreatRow): Promise<void> {
  const { attacker, kind } = row;
  const where = `${attacker} × ${kind}`;
  const name = `${attacker}-${kind}.txt.enc`;
  const expected = shows(attacker, kind);
  // The document's table and the built rows agree on what happens.
  if ('error' in expected) expect(row.outcome, where).toMatchObject({ error: expected.error });
  else expect('result' in row.outcome, where).toBe(true);

  await tab.evaluate(([n, b64]) => tm.setFile(n, b64), [name, Buffer.from(row.file).toString('base64')] as const);
  const opened = await outcome(tab, '#file-info', `${where}: the header read`);

  if ('error' in expected && expected.error === 'BAD_SIGNATURE') {
    // Refused at the header: the error instead of any sender.
    expect(opened, where).toBe('error');
    expect(await tab.evaluate(() => tm.error()), where).toEqual({
      code: 'BAD_SIGNATURE',
      title: `Cannot open ${name}: ${ERROR_TITLES.BAD_SIGNATURE}`,
    });
    expect(await tab.evaluate(() => tm.shown('#sender')), `${where}: no sender shown`).toBe(false);
    const text = await tab.evaluate(() => tm.visibleText());
    expect(text, where).not.toContain(CLAIMED);
    expect(text, where).not.toContain(VERIFIED);
    await noOverflow(tab, where);
    return;
  }

  // Before any key: the header's sender, only ever a claim.
  expect(opened, `${where}: ${await tab.evaluate(() => tm.error().title)}`).toBe('shown');
  const claimed = claimedBy(attacker, kind);
  expect(row.claimed?.con[0]?.v, where).toBe(claimed === mallory ? MALLORY : ALICE);
  expectSender(
    await tab.evaluate(() => tm.sender('#sender')),
    `${where}, claimed`,
    CLAIMED,
    'claimed',
    [[CLAIMED, claimed]],
    claimed === aliceDemo,
  );
  await noOverflow(tab, `${where}, claimed`);

  // Bob's key: a QR session the first time, the remembered key after.
  expect(await tab.evaluate((id) => tm.chooseRecipient(id), BOB)).toBe(true);
  await tab.evaluate(() => tm.click('#get-key'));
  const keyed = await until(
    () =>
      tab.evaluate(() =>
        tm.shown('#error') ? 'error' : tm.shown('#open') ? 'open' : tm.sessionLink() !== undefined ? 'scan' : undefined,
      ),
    `${where}: Bob's key`,
  );
  if (keyed === 'scan') {
    expect(keyRemembered, `${where}: a second QR session although the key was remembered`).toBe(false);
    const report = await disclose((await tab.evaluate(() => tm.sessionLink()))!, { [EMAIL]: BOB });
    expect(report.proofStatus).toBe('VALID');
    expect(await outcome(tab, '#open', `${where}: the key after the scan`)).toBe('shown');
  } else {
    expect(keyed, `${where}: ${await tab.evaluate(() => tm.error().title)}`).toBe('open');
  }
  const source = await tab.evaluate(() => tm.attr('#open', 'data-key-source'));
  expect(source, `${where}: where the key came from`).toBe(keyRemembered ? 'cache' : 'session');
  keyRemembered = true;

  // Decrypt it (a preview: nothing saved) to its end.
  await tab.evaluate(() => tm.click('#preview'));
  const decrypted = await outcome(tab, '#verified', `${where}: the preview`);
  if ('error' in expected) {
    expect(decrypted, where).toBe('error');
    expect(await tab.evaluate(() => tm.error()), where).toEqual({
      code: expected.error,
      title: `Preview failed: ${ERROR_TITLES[expected.error]}`,
    });
    expect(await tab.evaluate(() => tm.shown('#verified')), `${where}: no sender region`).toBe(false);
    expect(await tab.evaluate(() => tm.shown('#preview-area')), `${where}: nothing previewed`).toBe(false);
    expect(await tab.evaluate(() => tm.visibleText()), where).not.toContain(VERIFIED);
  } else {
    expect(decrypted, `${where}: ${await tab.evaluate(() => tm.error().title)}`).toBe('shown');
    expect(await tab.evaluate(() => tm.shown('#preview-area pre')), `${where}: the preview`).toBe(true);
    expect(await tab.evaluate(() => tm.attr('#verified', 'data-standing')), where).toBe(expected.standing);
    expectSender(
      await tab.evaluate(() => tm.sender('#verified')),
      where,
      expected.headline,
      expected.standing,
      expected.lines,
      kind === 'demo-sender',
    );
    // "Verified sender" only where the document says so.
    if (expected.standing !== 'verified') {
      expect(await tab.evaluate(() => tm.visibleText()), where).not.toContain(VERIFIED);
    }
  }
  await noOverflow(tab, where);
}

for (const attacker of ATTACKERS) {
  test(`threat model (docs/security.md), ${attacker}: each kind of file on the decrypt page`, async ({
    tab,
    stack,
    model,
    engine,
  }) => {
    // A phone's width, where long labels would first overflow (MiniBrowser's window is at least 447 px).
    await tab.setViewport(390, 844);
    await openDecryptPage(tab, stack.demoUrl);
    for (const kind of FILE_KINDS) {
      const row = model.rows.find((r) => r.attacker === attacker && r.kind === kind)!;
      await test.step(`${attacker} × ${kind} (${engine})`, () => checkRow(tab, row));
    }
    // The last row (a demo sender) as a person sees it, for the report.
    const path = test.info().outputPath(`${engine}-${attacker}.png`);
    await tab.screenshot(path);
    await test.info().attach(`${engine}: ${attacker} × demo-sender`, { path, contentType: 'image/png' });
  });
}

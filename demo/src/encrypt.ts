import { downloadZip } from 'client-zip';
import type { IdentitySession, SealOptions, SigningKeys } from 'postguard-ts/worker';
import { EMAIL, EXTRA_ATTRIBUTES, MOBILE, identityLines } from './attributes.js';
import { byId, h, setStatus, showError, uid } from './dom.js';
import { BUNDLE_NAME, TEXT_NAME, encryptedName, formatBytes } from './files.js';
import { DemoError } from './messages.js';
import { ProgressView } from './progress.js';
import { encryptionPolicy, policyTimestamp, type FieldProblem, type RecipientInput } from './recipients.js';
import { getServices } from './runtime.js';
import { saveStream } from './save.js';
import { SessionPanel } from './session-panel.js';

/**
 * The encrypt page: recipients (e-mail plus optional attributes), a message or files, the sender's
 * identity (a Yivi session; an organisation's API key belongs on a server: the page points to the SDK), then seal in the crypto worker straight
 * into a download. Files are streamed: File.stream() → worker → service worker → disk.
 */

const services = getServices();
const form = byId<HTMLFormElement>('encrypt-form');
const list = byId<HTMLOListElement>('recipient-list');
const errorRegion = byId('error');
const result = byId('result');
const progressSlot = byId('progress-slot');
const signerStatus = byId('signer-status');

/** One recipient's inputs: the e-mail address and any extra attributes. */
class RecipientRow {
  readonly el: HTMLLIElement;
  readonly email: HTMLInputElement;
  private readonly emailLabel: HTMLLabelElement;
  private readonly removeButton: HTMLButtonElement;
  private readonly emailProblem: HTMLElement;
  private readonly extras: Array<{ type: string; input: HTMLInputElement; problem: HTMLElement; el: HTMLElement }> = [];
  private readonly extrasEl: HTMLElement;

  constructor(private readonly onRemove: (row: RecipientRow) => void) {
    const emailId = uid('recipient-email');
    const problemId = uid('problem');
    this.email = h('input', {
      type: 'email',
      id: emailId,
      autocomplete: 'off',
      required: true,
      'aria-describedby': problemId,
    });
    this.emailProblem = h('p', { id: problemId, class: 'problem', hidden: true });
    this.extrasEl = h('div', { class: 'extras' });
    const selectId = uid('attribute-type');
    const select = h(
      'select',
      { id: selectId },
      ...EXTRA_ATTRIBUTES.map((a) => h('option', { value: a.type }, a.label)),
    );
    this.emailLabel = h('label', { for: emailId }, 'Recipient e-mail address');
    this.removeButton = h(
      'button',
      { type: 'button', class: 'secondary', onclick: () => this.onRemove(this) },
      'Remove recipient',
    );
    this.el = h(
      'li',
      { class: 'recipient' },
      h('div', { class: 'recipient-head' }, h('div', {}, this.emailLabel, this.email), this.removeButton),
      this.emailProblem,
      this.extrasEl,
      h(
        'div',
        { class: 'row-tools' },
        h('div', {}, h('label', { for: selectId }, 'Also require'), select),
        h(
          'button',
          { type: 'button', class: 'secondary', onclick: () => this.addExtra(select.value) },
          'Add attribute',
        ),
      ),
    );
  }

  /** Labels say which recipient they belong to once there are several. */
  number(n: number, of: number): void {
    this.emailLabel.textContent = of === 1 ? 'Recipient e-mail address' : `Recipient ${n} e-mail address`;
    this.removeButton.textContent = of === 1 ? 'Remove recipient' : `Remove recipient ${n}`;
    this.removeButton.hidden = of === 1;
  }

  addExtra(type: string): void {
    const kind = EXTRA_ATTRIBUTES.find((k) => k.type === type);
    if (kind === undefined) return;
    const id = uid('attribute');
    const problemId = uid('problem');
    const input = h('input', {
      type: kind.input,
      id,
      autocomplete: 'off',
      placeholder: kind.example,
      'data-attribute': kind.type,
      'aria-describedby': problemId,
    });
    const problem = h('p', { id: problemId, class: 'problem', hidden: true });
    const entry = { type, input, problem, el: h('div', { class: 'extra-wrap' }) };
    const remove = h(
      'button',
      {
        type: 'button',
        class: 'secondary',
        onclick: () => {
          entry.el.remove();
          this.extras.splice(this.extras.indexOf(entry), 1);
        },
      },
      `Remove ${kind.label.toLowerCase()}`,
    );
    entry.el.append(
      h('div', { class: 'extra' }, h('div', {}, h('label', { for: id }, kind.label), input), remove),
      problem,
    );
    this.extras.push(entry);
    this.extrasEl.append(entry.el);
    input.focus();
  }

  value(): RecipientInput {
    return { email: this.email.value, extras: this.extras.map((e) => ({ type: e.type, value: e.input.value })) };
  }

  clearProblems(): void {
    for (const [input, problem] of [
      [this.email, this.emailProblem] as const,
      ...this.extras.map((e) => [e.input, e.problem] as const),
    ]) {
      input.removeAttribute('aria-invalid');
      problem.hidden = true;
      problem.textContent = '';
    }
  }

  /** Marks a field; returns it so the first one can take focus. */
  markProblem(problem: FieldProblem): HTMLInputElement | undefined {
    const target =
      problem.field === 'email' ? { input: this.email, problem: this.emailProblem } : this.extras[problem.field];
    if (target === undefined) return undefined;
    target.input.setAttribute('aria-invalid', 'true');
    target.problem.textContent = problem.message;
    target.problem.hidden = false;
    return target.input;
  }
}

const rows: RecipientRow[] = [];

function renumber(): void {
  rows.forEach((row, i) => row.number(i + 1, rows.length));
}

function addRecipient(): RecipientRow {
  const row = new RecipientRow((r) => {
    if (rows.length === 1) return;
    rows.splice(rows.indexOf(r), 1);
    r.el.remove();
    renumber();
    rows[0]?.email.focus();
  });
  rows.push(row);
  list.append(row.el);
  renumber();
  return row;
}

addRecipient();
byId('add-recipient').addEventListener('click', () => addRecipient().email.focus());

// What to encrypt: a message or files.
const message = byId<HTMLTextAreaElement>('message');
const filesInput = byId<HTMLInputElement>('files');
const fileList = byId<HTMLUListElement>('file-list');
const contentKind = (): 'text' | 'files' =>
  (form.querySelector<HTMLInputElement>('input[name=content]:checked')?.value as 'text' | 'files' | undefined) ??
  'text';
function showContentInputs(): void {
  const kind = contentKind();
  byId('text-input').hidden = kind !== 'text';
  byId('files-input').hidden = kind !== 'files';
}
for (const radio of form.querySelectorAll<HTMLInputElement>('input[name=content]'))
  radio.addEventListener('change', showContentInputs);
filesInput.addEventListener('change', () => {
  fileList.replaceChildren(
    ...Array.from(filesInput.files ?? [], (f) => h('li', {}, `${f.name} (${formatBytes(f.size)})`)),
  );
});

// The sender proves who they are with Yivi. An API key never goes in a page (the library refuses
// one there): the form points organisations to the SDK instead.
const senderEmail = byId<HTMLInputElement>('sender-email');
const signMobile = byId<HTMLInputElement>('sign-mobile');

function fieldProblem(
  input: HTMLInputElement | HTMLTextAreaElement,
  problemId: string,
  text: string | undefined,
): boolean {
  const problem = byId(problemId);
  if (text === undefined) {
    input.removeAttribute('aria-invalid');
    problem.hidden = true;
    return false;
  }
  input.setAttribute('aria-invalid', 'true');
  problem.textContent = text;
  problem.hidden = false;
  return true;
}

/** Signing keys already obtained in this page, by the identity they were asked for. */
const signingKeyCache = new Map<string, SigningKeys>();

async function signingKeys(panel: SessionPanel): Promise<SigningKeys> {
  const { pkg } = await services;
  const email = senderEmail.value.trim();
  const mobile = signMobile.checked;
  const cacheKey = `yivi\n${email}\n${mobile}`;
  const known = signingKeyCache.get(cacheKey);
  if (known) return known;
  const keys = await pkg.signingKeysWithSession({
    con: [email === '' ? { t: EMAIL } : { t: EMAIL, v: email }, ...(mobile ? [{ t: MOBILE }] : [])],
    pubSignId: [{ t: EMAIL }],
    ...(mobile ? { privSignId: [{ t: MOBILE }] } : {}),
    onSession: (session: IdentitySession) => panel.show(session),
  });
  signingKeyCache.set(cacheKey, keys);
  return keys;
}

function describeSigner(keys: SigningKeys): string {
  const visible = identityLines(keys.pubSignKey.policy)
    .map((l) => `${l.label} ${l.value}`)
    .join(', ');
  const hidden = identityLines(keys.privSignKey?.policy)
    .map((l) => `${l.label} ${l.value}`)
    .join(', ');
  return `Signing as ${visible || 'an organisation'}${hidden === '' ? '' : ` (recipients also see: ${hidden})`}.`;
}

interface Plaintext {
  name: string;
  stream: () => ReadableStream<Uint8Array>;
  size: number;
  what: string;
}

function plaintext(): Plaintext {
  if (contentKind() === 'text') {
    const blob = new Blob([message.value], { type: 'text/plain' });
    return { name: TEXT_NAME, stream: () => blob.stream(), size: blob.size, what: 'the message' };
  }
  const files = Array.from(filesInput.files ?? []);
  const size = files.reduce((n, f) => n + f.size, 0);
  if (files.length === 1) {
    const file = files[0]!;
    return { name: file.name, stream: () => file.stream(), size, what: file.name };
  }
  return {
    name: BUNDLE_NAME,
    // client-zip reads each File as a stream while the ZIP is being read.
    stream: () => downloadZip(files).body!,
    size,
    what: `${files.length} files`,
  };
}

/** Checks the form; marks what is wrong and focuses the first problem. */
function validate(): boolean {
  const stamp = policyTimestamp();
  const checked = encryptionPolicy(
    rows.map((r) => r.value()),
    stamp,
  );
  for (const row of rows) row.clearProblems();
  const focusable: Array<HTMLInputElement | HTMLTextAreaElement> = [];
  if (!checked.ok) {
    for (const p of checked.problems) {
      const input = rows[p.row]?.markProblem(p);
      if (input) focusable.push(input);
    }
  }
  if (
    fieldProblem(
      message,
      'message-problem',
      contentKind() === 'text' && message.value === '' ? 'Type a message to encrypt.' : undefined,
    )
  ) {
    focusable.push(message);
  }
  if (
    fieldProblem(
      filesInput,
      'files-problem',
      contentKind() === 'files' && (filesInput.files?.length ?? 0) === 0 ? 'Choose at least one file.' : undefined,
    )
  ) {
    focusable.push(filesInput);
  }
  const email = senderEmail.value.trim();
  if (
    fieldProblem(
      senderEmail,
      'sender-email-problem',
      email !== '' && !/^[^\s@]+@[^\s@]+\.[^\s@.]+$/.test(email) ? `"${email}" is not an e-mail address.` : undefined,
    )
  ) {
    focusable.push(senderEmail);
  }
  focusable[0]?.focus();
  return focusable.length === 0;
}

let busy = false;

async function encrypt(): Promise<void> {
  showError(errorRegion, undefined);
  result.hidden = true;
  if (!validate()) return;
  const { config, pg, pkg } = await services;
  const panel = new SessionPanel(
    'Prove who you are',
    'Scan this QR code with the Yivi app to sign the file with your identity.',
    config.walletUrl,
  );
  byId('session-slot').replaceChildren(panel.el);
  progressSlot.replaceChildren();
  const button = byId<HTMLButtonElement>('encrypt-button');
  busy = true;
  button.disabled = true;
  let progress: ProgressView | undefined;
  try {
    const keys = await signingKeys(panel);
    panel.hide();
    setStatus(signerStatus, describeSigner(keys));
    const mpk = await pkg.masterPublicKey();
    // The timestamp is taken now, after any Yivi wait, and never in the future for the PKG.
    const checked = encryptionPolicy(
      rows.map((r) => r.value()),
      policyTimestamp(),
    );
    if (!checked.ok) throw new DemoError('INVALID_POLICY', checked.problems[0]!.message);
    const options: SealOptions = { policy: checked.policy, pubSignKey: keys.pubSignKey };
    if (keys.privSignKey) options.privSignKey = keys.privSignKey;

    const source = plaintext();
    const outName = encryptedName(source.name);
    const view = new ProgressView(`Encrypting ${source.what}`);
    progress = view;
    progressSlot.replaceChildren(view.el);
    const target = await saveStream(outName, { onBytes: (n) => view.set(n, source.size) });
    await pg.sealStream(mpk, options, source.stream(), target.writable);
    const bytes = await target.done.catch((e: unknown) => {
      throw new DemoError('DOWNLOAD_FAILED', e instanceof Error ? e.message : String(e));
    });
    view.finish(`${formatBytes(bytes)} encrypted`);
    const recipients = Object.keys(checked.policy);
    result.replaceChildren(
      h('p', {}, h('strong', {}, `Encrypted ${source.what} for ${recipients.join(', ')}.`)),
      h(
        'p',
        {},
        `Your browser saved it as ${outName} (${formatBytes(bytes)}). Send that file to the recipients; they open it on the `,
        h('a', { href: './decrypt.html' }, 'Decrypt page'),
        '.',
      ),
      h(
        'p',
        { class: 'note' },
        target.method === 'service-worker'
          ? 'Streamed to disk as it was encrypted.'
          : 'Assembled in the browser, then saved (no service worker here).',
      ),
    );
    result.dataset['outcome'] = 'encrypted';
    result.hidden = false;
  } catch (error) {
    panel.hide();
    progress?.fail('Stopped');
    showError(errorRegion, error, 'Not encrypted');
  } finally {
    busy = false;
    button.disabled = false;
  }
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  if (!busy) void encrypt();
});

void services.then(async ({ config, serviceWorker }) => {
  const link = byId<HTMLAnchorElement>('wallet-link');
  if (config.walletUrl !== null) {
    link.href = config.walletUrl;
    link.hidden = false;
  }
  document.body.dataset['serviceWorker'] = String(await serviceWorker);
  document.body.dataset['ready'] = 'true';
});

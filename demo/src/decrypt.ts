import {
  claimedSenderReport,
  prepareDownload,
  senderReport,
  triggerDownload,
  type SenderReport,
  type IdentitySession,
  type Policy,
  type VerificationResult,
  type WorkerUnsealer,
} from 'postguard-ts/worker';
import { HINT_TYPES, type UserKeys, type VerifyingKeys } from 'postguard-ts';
import { attributeLabel, isEmailType } from './attributes.js';
import { append, byId, h, setStatus, showError, uid } from './dom.js';
import { PREVIEW_LIMIT, contentTypeFor, decryptedName, formatBytes, previewKind } from './files.js';
import { DemoError, errorCode } from './messages.js';
import { ProgressView } from './progress.js';
import { normalizeValue } from './recipients.js';
import { TIER_SETTING, getServices } from './runtime.js';
import { offerBlob, saveStream } from './save.js';
import { senderView } from './sender-view.js';
import { SessionPanel } from './session-panel.js';

/**
 * The decrypt page: pick a .enc file; its header (read in the crypto worker) lists the recipients
 * with their hidden policies and the sender's signed identity. Pick who you are, prove it with
 * Yivi (or use a remembered key), then download or preview: the service worker decrypts the file
 * as the browser reads it, so memory stays flat at any size, and a file that fails to
 * authenticate anywhere fails the download instead of leaving a short or altered file.
 */

/** Files sealed in memory (pg-wasm's seal) are read whole; this bounds what we agree to read. */
const IN_MEMORY_LIMIT = 256 * 1024 * 1024;
const REMEMBER_SETTING = 'postguard-demo:remember-keys';

const services = getServices();
const errorRegion = byId('error');
const fileInput = byId<HTMLInputElement>('enc-file');
const dropzone = byId('dropzone');
const fileInfo = byId('file-info');
const keyForm = byId<HTMLFormElement>('key-form');
const choices = byId('recipient-choices');
const hiddenValues = byId('hidden-values');
const remember = byId<HTMLInputElement>('remember');
const openSection = byId('open');
const keyStatus = byId('key-status');
const progressSlot = byId('progress-slot');
const verifiedRegion = byId('verified');
const previewArea = byId('preview-area');

interface Opened {
  file: File;
  mode: 'stream' | 'memory';
  recipients: Map<string, Policy>;
  sender: Policy;
  /** In-memory ciphertexts: the unsealer holding it, in the worker. */
  memory?: WorkerUnsealer;
}

interface Key {
  recipientId: string;
  /** The primary's user key, or one per key of the PKG's key set (a file sealed before a rotation opens too). */
  usk: UserKeys;
  source: 'cache' | 'cached-jwt' | 'session';
}

let opened: Opened | undefined;
let key: Key | undefined;
let sessionAbort: AbortController | undefined;
/** After a remembered key failed to open a file, the next key request skips the cache. */
let nextKeyFresh = false;
let previewUrl: string | undefined;
let busy = false;

remember.checked = localStorage.getItem(REMEMBER_SETTING) === 'true';
remember.addEventListener('change', () => localStorage.setItem(REMEMBER_SETTING, String(remember.checked)));

// ---- Which key protects remembered keys: the browser's own (device) or a passkey (PRF) ----

type Tier = 'device' | 'passkey';
const tierInputs = document.querySelectorAll<HTMLInputElement>('input[name="remember-tier"]');
const setupPasskey = byId<HTMLButtonElement>('setup-passkey');
const tierStatus = byId('tier-status');

/** Says which tier is in use (and whether a passkey is set up), from the PKG client itself. */
async function showTier(): Promise<void> {
  const { pkg } = await services;
  const tier = pkg.keyProtection;
  for (const input of tierInputs) input.checked = input.value === tier;
  const passkey = tier === 'passkey' ? await pkg.passkey() : undefined;
  setupPasskey.hidden = tier !== 'passkey';
  setupPasskey.textContent = passkey === undefined ? 'Set up a passkey' : 'Set up another passkey';
  tierStatus.dataset['tier'] = tier;
  setStatus(
    tierStatus,
    tier === 'device'
      ? "In use: this browser's own key."
      : passkey === undefined
        ? 'In use: a passkey, but none is set up yet. Set one up before remembering a key.'
        : 'In use: your passkey. It is asked once per visit.',
  );
}

async function chooseTier(tier: Tier): Promise<void> {
  showError(errorRegion, undefined);
  try {
    const { pkg } = await services;
    // A change forgets what is remembered: it was sealed under the other key.
    await pkg.useKeyProtection(tier);
    localStorage.setItem(TIER_SETTING, tier);
  } catch (error) {
    showError(errorRegion, error, 'Could not change how keys are protected');
  }
  await showTier();
}

for (const input of tierInputs) input.addEventListener('change', () => void chooseTier(input.value as Tier));
setupPasskey.addEventListener('click', () => {
  void (async () => {
    showError(errorRegion, undefined);
    try {
      const { pkg } = await services;
      await pkg.registerPasskey({ userName: 'PostGuard demo keys' });
    } catch (error) {
      showError(errorRegion, error, 'No passkey set up');
    }
    await showTier();
  })();
});
showTier().catch((error: unknown) => showError(errorRegion, error, 'Could not read how keys are protected'));

function resetBelowFile(): void {
  key = undefined;
  sessionAbort?.abort();
  byId('session-slot').replaceChildren();
  openSection.hidden = true;
  progressSlot.replaceChildren();
  verifiedRegion.hidden = true;
  clearPreview();
  showError(errorRegion, undefined);
}

function clearPreview(): void {
  if (previewUrl !== undefined) URL.revokeObjectURL(previewUrl);
  previewUrl = undefined;
  previewArea.replaceChildren();
  previewArea.hidden = true;
}

async function inspect(file: File): Promise<Opened> {
  const { pg, pkg } = await services;
  const vk = await pkg.verificationKeys();
  try {
    const unsealer = await pg.StreamUnsealer.new(file.stream(), vk);
    try {
      return {
        file,
        mode: 'stream',
        recipients: await unsealer.inspect_header(),
        sender: await unsealer.public_identity(),
      };
    } finally {
      unsealer.free();
    }
  } catch (error) {
    if (errorCode(error) !== 'WRONG_MODE') throw error;
    if (file.size > IN_MEMORY_LIMIT) {
      throw new DemoError(
        'WRONG_MODE',
        `this file was sealed in memory and is larger than ${formatBytes(IN_MEMORY_LIMIT)}`,
      );
    }
    const unsealer = await pg.Unsealer.new(new Uint8Array(await file.arrayBuffer()), vk);
    return {
      file,
      mode: 'memory',
      recipients: await unsealer.inspect_header(),
      sender: await unsealer.public_identity(),
      memory: unsealer,
    };
  }
}

/** How a recipient's hidden policy reads: "Mobile number +31612…" for hints, "Surname (hidden)" otherwise. */
function describeHidden(recipientId: string, policy: Policy): string {
  const parts = policy.con
    .filter((a) => !isEmailType(a.t))
    .map((a) => {
      const hint = a.v ?? '';
      return HINT_TYPES.has(a.t) && hint !== '' ? `${attributeLabel(a.t)} ${hint}` : `${attributeLabel(a.t)} (hidden)`;
    });
  return parts.length === 0
    ? `Anyone who proves ${recipientId}`
    : `Whoever proves ${recipientId} and: ${parts.join(', ')}`;
}

function selectedRecipient(): string | undefined {
  return choices.querySelector<HTMLInputElement>('input[name=recipient]:checked')?.value;
}

/** Inputs for the attributes of the chosen recipient that the header does not reveal. */
function renderHiddenValues(): void {
  hiddenValues.replaceChildren();
  const id = selectedRecipient();
  const policy = id === undefined ? undefined : opened?.recipients.get(id);
  if (policy === undefined) return;
  for (const attribute of policy.con) {
    if (isEmailType(attribute.t) || attribute.t.endsWith('.email.domain')) continue;
    const inputId = uid('hidden-value');
    const noteId = uid('note');
    const hint = attribute.v ?? '';
    const label = attributeLabel(attribute.t);
    hiddenValues.append(
      h('label', { for: inputId }, `Your ${label.toLowerCase()}`),
      h('input', {
        type: 'text',
        id: inputId,
        'data-attribute': attribute.t,
        autocomplete: 'off',
        placeholder: hint,
        'aria-describedby': noteId,
      }),
      h(
        'p',
        { id: noteId, class: 'note' },
        hint === ''
          ? 'The file requires a specific value here. Type it, or leave it empty and let the Yivi app disclose yours.'
          : `The file shows it partly: ${hint}. Type the full value, or leave it empty and let the Yivi app disclose yours.`,
      ),
    );
  }
}

function showFile(o: Opened): void {
  const facts = byId('file-facts');
  const firstPolicy = o.recipients.values().next().value as Policy | undefined;
  facts.replaceChildren(
    h('dt', {}, 'Name'),
    h('dd', {}, o.file.name),
    h('dt', {}, 'Size'),
    h('dd', {}, formatBytes(o.file.size)),
    h('dt', {}, 'Encrypted'),
    h('dd', {}, firstPolicy === undefined ? 'unknown' : new Date(firstPolicy.ts * 1000).toLocaleString()),
    h('dt', {}, 'Recipients'),
    h('dd', {}, String(o.recipients.size)),
  );
  const sender = byId('sender');
  sender.replaceChildren();
  append(sender, [
    ...senderParts(claimedSenderReport(o.sender)),
    h(
      'p',
      { class: 'note' },
      'The sender may have signed with more attributes that only recipients see; they appear after decryption.',
    ),
  ]);
  const ids = [...o.recipients.keys()];
  choices.replaceChildren(
    ...ids.map((id, i) =>
      h(
        'label',
        {},
        h('input', {
          type: 'radio',
          name: 'recipient',
          value: id,
          checked: i === 0 || undefined,
          onchange: renderHiddenValues,
        }),
        h('span', {}, h('strong', {}, id), h('small', {}, describeHidden(id, o.recipients.get(id)!))),
      ),
    ),
  );
  renderHiddenValues();
  fileInfo.hidden = false;
}

/** Counts picked files: the header of a file picked while another was still being read wins. */
let picked = 0;

async function chooseFile(file: File): Promise<void> {
  const generation = ++picked;
  resetBelowFile();
  opened?.memory?.free();
  opened = undefined;
  fileInfo.hidden = true;
  dropzone.dataset['file'] = file.name;
  try {
    const result = await inspect(file);
    if (generation !== picked) {
      result.memory?.free();
      return;
    }
    opened = result;
    showFile(result);
    byId<HTMLButtonElement>('get-key').focus();
  } catch (error) {
    if (generation === picked) showError(errorRegion, error, `Cannot open ${file.name}`);
  }
}

fileInput.addEventListener('change', () => {
  const file = fileInput.files?.[0];
  if (file) void chooseFile(file);
});
dropzone.addEventListener('dragover', (event) => {
  event.preventDefault();
  dropzone.classList.add('over');
});
dropzone.addEventListener('dragleave', () => dropzone.classList.remove('over'));
dropzone.addEventListener('drop', (event) => {
  event.preventDefault();
  dropzone.classList.remove('over');
  const file = event.dataTransfer?.files[0];
  if (file) void chooseFile(file);
});

const KEY_SOURCE_TEXT: Record<Key['source'], string> = {
  session: 'Key received after your Yivi scan.',
  'cached-jwt': 'Key fetched with your earlier Yivi session: no scan needed.',
  cache: 'Key remembered on this device: no scan needed.',
};
const PASSKEY_SOURCE_TEXT: Partial<Record<Key['source'], string>> = {
  'cached-jwt': 'Key fetched with your earlier Yivi session, unlocked by your passkey: no scan needed.',
  cache: 'Key remembered under your passkey: no scan needed.',
};

async function getKey(): Promise<void> {
  showError(errorRegion, undefined);
  const o = opened;
  const recipientId = selectedRecipient();
  if (o === undefined || recipientId === undefined) return;
  const policy = o.recipients.get(recipientId)!;
  const values: Record<string, string> = {};
  for (const input of hiddenValues.querySelectorAll<HTMLInputElement>('input[data-attribute]')) {
    const type = input.dataset['attribute']!;
    const value = normalizeValue(type, input.value);
    if (value !== '') values[type] = value;
  }
  const { config, pkg } = await services;
  const panel = new SessionPanel(
    'Prove who you are',
    `Scan this QR code with the Yivi app and disclose what the file asks of ${recipientId}.`,
    config.walletUrl,
  );
  byId('session-slot').replaceChildren(panel.el);
  sessionAbort?.abort();
  const abort = new AbortController();
  sessionAbort = abort;
  const button = byId<HTMLButtonElement>('get-key');
  button.disabled = true;
  openSection.hidden = true;
  try {
    const answer = await pkg.decryptionKey({
      recipientId,
      policy,
      values,
      cache: remember.checked,
      fresh: nextKeyFresh,
      signal: abort.signal,
      onSession: (session: IdentitySession) => panel.show(session),
    });
    nextKeyFresh = false;
    key = { recipientId, usk: answer.usks ?? answer.usk, source: answer.source };
    panel.hide();
    openSection.dataset['keySource'] = answer.source;
    const passkeyText = pkg.keyProtection === 'passkey' ? PASSKEY_SOURCE_TEXT[answer.source] : undefined;
    setStatus(keyStatus, passkeyText ?? KEY_SOURCE_TEXT[answer.source]);
    const kind = previewKind(contentTypeFor(decryptedName(o.file.name)));
    byId('preview').hidden = kind === undefined || o.file.size > PREVIEW_LIMIT;
    verifiedRegion.hidden = true;
    progressSlot.replaceChildren();
    clearPreview();
    openSection.hidden = false;
    byId<HTMLButtonElement>('download').focus();
  } catch (error) {
    panel.hide();
    if (!abort.signal.aborted) showError(errorRegion, error, 'No key');
  } finally {
    button.disabled = false;
  }
}

keyForm.addEventListener('submit', (event) => {
  event.preventDefault();
  void getKey();
});

/** A sender in the library's words (sender-view.ts over postguard-ts `senderText`). */
const senderParts = (report: SenderReport): HTMLElement[] => [senderView(report)];

function showVerified(verified: VerificationResult, what: string): void {
  verifiedRegion.replaceChildren();
  const report = senderReport(verified);
  append(verifiedRegion, [h('p', {}, h('strong', {}, what)), ...senderParts(report)]);
  verifiedRegion.dataset['outcome'] = 'decrypted';
  verifiedRegion.dataset['standing'] = report.standing;
  verifiedRegion.hidden = false;
}

/** A failure to open the file with the key: a remembered key gets replaced next time. */
function failed(error: unknown, view: ProgressView | undefined, what: string): void {
  const code = errorCode(error);
  if (code === 'CANCELLED') {
    // The user stopped the download in the browser: their choice, not an error to alarm them with.
    view?.cancel('Cancelled: nothing was saved');
    return;
  }
  view?.fail('Failed');
  if ((code === 'WRONG_KEY' || code === 'UNKNOWN_RECIPIENT') && key?.source !== 'session') {
    nextKeyFresh = true;
    openSection.hidden = true;
  }
  showError(errorRegion, error, what);
}

/** Decrypts without the service worker: in the crypto worker, into a Blob (memory-mode files, or no service worker). */
async function decryptToBlob(
  o: Opened,
  k: Key,
  onBytes: (n: number) => void,
  contentType: string,
): Promise<[Blob, VerificationResult]> {
  const { pg, pkg } = await services;
  if (o.mode === 'memory') {
    const [plain, verified] = await o.memory!.unseal(k.recipientId, k.usk);
    onBytes(plain.byteLength);
    return [new Blob([plain as Uint8Array<ArrayBuffer>], { type: contentType }), verified];
  }
  const parts: Blob[] = [];
  let bytes = 0;
  const sink = new WritableStream<Uint8Array>({
    write(chunk) {
      parts.push(new Blob([chunk as Uint8Array<ArrayBuffer>]));
      bytes += chunk.byteLength;
      onBytes(bytes);
    },
  });
  const unsealer = await pg.StreamUnsealer.new(o.file.stream(), await pkg.verificationKeys());
  try {
    const verified = await unsealer.unseal(k.recipientId, k.usk, sink);
    return [new Blob(parts, { type: contentType }), verified];
  } finally {
    unsealer.free();
  }
}

/** Registers the opened file with the decrypting service worker; progress goes to `view`. */
function prepareDecryption(
  o: Opened,
  k: Key,
  vk: VerifyingKeys,
  filename: string,
  contentType: string,
  view: ProgressView,
  disposition: 'attachment' | 'inline',
) {
  return prepareDownload({
    source: o.file,
    recipientId: k.recipientId,
    usk: k.usk,
    vk,
    filename,
    contentType,
    disposition,
    onProgress: (n) => view.set(n, o.file.size),
  });
}

async function download(): Promise<void> {
  const o = opened;
  const k = key;
  if (o === undefined || k === undefined || busy) return;
  busy = true;
  showError(errorRegion, undefined);
  verifiedRegion.hidden = true;
  clearPreview();
  const filename = decryptedName(o.file.name);
  const contentType = contentTypeFor(filename);
  const view = new ProgressView(`Decrypting ${filename}`);
  progressSlot.replaceChildren(view.el);
  try {
    const { pkg, serviceWorker } = await services;
    let verified: VerificationResult;
    let method: string;
    if (o.mode === 'stream' && (await serviceWorker)) {
      const prepared = await prepareDecryption(
        o,
        k,
        await pkg.verificationKeys(),
        filename,
        contentType,
        view,
        'attachment',
      );
      triggerDownload(prepared.url, prepared.done);
      verified = await prepared.done;
      method = 'Decrypted as it streamed to disk; every segment was authenticated before it was written.';
    } else {
      const [blob, result] = await decryptToBlob(o, k, (n) => view.set(n, o.file.size), contentType);
      offerBlob(blob, filename);
      verified = result;
      method = 'Decrypted in the browser and saved once complete.';
    }
    view.finish('Done');
    showVerified(verified, `Decrypted and saved as ${filename}.`);
    verifiedRegion.append(h('p', { class: 'note' }, method));
  } catch (error) {
    failed(error, view, 'Download failed');
  } finally {
    busy = false;
  }
}

async function preview(): Promise<void> {
  const o = opened;
  const k = key;
  if (o === undefined || k === undefined || busy) return;
  busy = true;
  showError(errorRegion, undefined);
  clearPreview();
  verifiedRegion.hidden = true;
  const filename = decryptedName(o.file.name);
  const contentType = contentTypeFor(filename);
  const kind = previewKind(contentType);
  const view = new ProgressView(`Decrypting ${filename} for preview`);
  progressSlot.replaceChildren(view.el);
  try {
    if (kind === undefined) throw new DemoError('INVALID_STATE', 'this kind of file cannot be previewed');
    const { pkg, serviceWorker } = await services;
    let blob: Blob;
    let verified: VerificationResult;
    if (o.mode === 'stream' && (await serviceWorker)) {
      const prepared = await prepareDecryption(
        o,
        k,
        await pkg.verificationKeys(),
        filename,
        contentType,
        view,
        'inline',
      );
      const response = await fetch(prepared.url);
      try {
        if (!response.ok) await response.body?.cancel();
        blob = await response.blob();
      } catch (readError) {
        // The body failed: the service worker's coded error says why.
        await prepared.done;
        throw readError;
      }
      verified = await prepared.done;
    } else {
      [blob, verified] = await decryptToBlob(o, k, (n) => view.set(n, o.file.size), contentType);
    }
    view.finish('Done');
    if (kind === 'text') {
      previewArea.replaceChildren(
        h('pre', { tabindex: 0, 'aria-label': `Contents of ${filename}` }, await blob.text()),
      );
    } else {
      previewUrl = URL.createObjectURL(blob.type === '' ? new Blob([blob], { type: contentType }) : blob);
      previewArea.replaceChildren(
        kind === 'image'
          ? h('img', { src: previewUrl, alt: `Preview of ${filename}` })
          : h('iframe', { src: previewUrl, title: `Preview of ${filename}` }),
      );
    }
    previewArea.hidden = false;
    showVerified(verified, `Decrypted ${filename} for preview (not saved).`);
  } catch (error) {
    failed(error, view, 'Preview failed');
  } finally {
    busy = false;
  }
}

byId('download').addEventListener('click', () => void download());
byId('preview').addEventListener('click', () => void preview());

async function forget(): Promise<void> {
  try {
    const { pkg } = await services;
    await pkg.forgetKeys();
    // The key in this page came from the same cache or session: drop it too.
    if (key !== undefined) {
      key = undefined;
      openSection.hidden = true;
    }
    setStatus(byId('forget-status'), 'Forgotten. The next file asks for a new Yivi scan.');
  } catch (error) {
    showError(errorRegion, error, 'Could not forget keys');
  }
}

byId('forget').addEventListener('click', () => void forget());

void services.then(async ({ config, serviceWorker }) => {
  const link = byId<HTMLAnchorElement>('wallet-link');
  if (config.walletUrl !== null) {
    link.href = config.walletUrl;
    link.hidden = false;
  }
  document.body.dataset['serviceWorker'] = String(await serviceWorker);
  document.body.dataset['ready'] = 'true';
});

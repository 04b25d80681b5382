import {
  StreamUnsealer,
  claimedSenderReport,
  senderReport,
  senderText,
  startHashThread,
  type Policy,
  type SenderReport,
} from 'postguard-ts';
import { decodeHeader, readFrame } from 'postguard-ts/format';
import type { DisclosureAttribute } from 'postguard-ts/pkg';
import {
  COMMON_HELP,
  COMMON_OPTIONS,
  bool,
  commonSettings,
  onePositional,
  parseCommand,
  str,
  type CliIo,
} from './args.js';
import { Exit, usage, type ExitCode } from './exit.js';
import {
  createAtomicOutput,
  HASH_THREAD_FROM_BYTES,
  openInput,
  refuseExisting,
  type AtomicOutput,
  type InputFile,
} from './files.js';
import { defaultValue, describePolicy, hiddenValue, matchesHint, parseAttrs } from './identity.js';
import { identitySession, pkgClient } from './pkg.js';
import { Prompter } from './prompt.js';
import { Progress } from './terminal.js';

export const DEC_HELP = `Usage: pg-cli dec [options] <file>.enc

Shows who the file is for and who signed it, asks which recipient you are and the values of
that recipient's attributes, runs an identity session (a QR code to scan with the Yivi app)
for exactly those attributes, and decrypts. Writes <file> (the name without .enc) unless -o
says otherwise. The output appears only once the whole file has been authenticated.

Options:
  -r, --recipient <id>        which recipient you are (asked on a terminal when there are several)
      --attr <type>=<value>   a value for one of the recipient's attributes (repeatable); asked on a
                              terminal when missing; e-mail attributes default to the recipient id
${COMMON_HELP}`;

const DEC_OPTIONS = {
  ...COMMON_OPTIONS,
  recipient: { type: 'string', short: 'r' },
  attr: { type: 'string', multiple: true },
} as const;

const when = (ts: number): string => new Date(ts * 1000).toISOString().replace('.000Z', 'Z');

export async function dec(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommand('dec', argv, DEC_OPTIONS);
  if (bool(values, 'help')) {
    io.stdout.write(DEC_HELP);
    return Exit.OK;
  }
  const settings = commonSettings(values, io);
  const file = onePositional('dec', positionals);
  const attrs = parseAttrs((values['attr'] as string[] | undefined) ?? []);
  let output = settings.output;
  if (output === undefined) {
    if (!file.endsWith('.enc') || file.length === 4 || file.endsWith('/.enc')) {
      throw usage(`dec: ${file} does not end in .enc; name the output with -o`);
    }
    output = file.slice(0, -4);
  }

  const { signal } = io;
  const interactive = io.stdin.isTTY === true;
  let prompter: Prompter | undefined;
  const input = await openInput(file);
  // As enc: a large file's transcript is hashed on a thread of its own, started while the PKG is asked.
  const hashThread = input.size >= HASH_THREAD_FROM_BYTES ? startHashThread() : undefined;
  let out: AtomicOutput | undefined;
  try {
    // Garbage is refused before the PKG is asked or the output path is looked at.
    await checkContainer(input);
    await refuseExisting(output, settings.force);
    const client = pkgClient(settings.pkgUrl, io.version);
    // The PKG's key set: a file sealed and signed under any of its current master keys opens.
    const vk = await client.verificationKeys({ signal });
    // Progress starts with the decryption; the header read before it is counted then.
    let progress: Progress | undefined;
    let readBeforeProgress = 0;
    const onRead = (bytes: number) => (progress === undefined ? (readBeforeProgress += bytes) : progress.add(bytes));
    await hashThread;
    const unsealer = await StreamUnsealer.new(input.readable(onRead, signal), vk);

    const recipients = unsealer.inspect_header();
    // Only the header is checked so far: its sender is a claim until the content has verified.
    io.stderr.write(senderLines(claimedSenderReport(unsealer.public_identity())));
    io.stderr.write(`Encrypted for:\n${recipientLines(recipients)}`);

    const ask = (): Prompter => (prompter ??= new Prompter(io.stdin, io.stderr, signal));
    const recipientId = await chooseRecipient(recipients, str(values, 'recipient'), interactive ? ask : undefined);
    const hidden = recipients.get(recipientId)!;
    const con = await disclosureFor(recipientId, hidden, attrs, interactive ? ask : undefined);
    prompter?.close();

    const jwt = await identitySession(client, { con }, 'decrypt', {
      out: io.stderr,
      qr: settings.qr,
      pointerSink: settings.pointerSink,
      timeoutMs: settings.sessionTimeoutMs,
      signal,
    });
    // One user key per current master key, from the one session; the unsealer tries each.
    const usk = await client.userSecretKeys(jwt, hidden.ts, { signal });

    out = await createAtomicOutput(output, { force: settings.force, mode: 0o600 });
    if (settings.progress) {
      progress = new Progress(io.stderr, 'Decrypting', input.size);
      progress.add(readBeforeProgress);
    }
    const verified = await unsealer.unseal(recipientId, usk, out.writable);
    progress?.finish();
    await out.commit();

    const report = senderReport(verified);
    if (settings.json) {
      const sender = report.standing;
      const { keyIds, ...signedBy } = verified;
      const under = keyIds?.userKey === undefined ? {} : { keyId: keyIds.userKey };
      io.stdout.write(`${JSON.stringify({ output, recipient: recipientId, sender, signedBy, ...under })}\n`);
    } else {
      io.stdout.write(`Decrypted ${file} to ${output}\n`);
      // Only news where the PKG has several keys to choose from.
      if (verified.keyIds?.userKey !== undefined && Array.isArray(usk) && usk.length > 1)
        io.stdout.write(`Sealed under PKG key ${verified.keyIds.userKey}\n`);
      io.stdout.write(senderLines(report));
    }
    return Exit.OK;
  } finally {
    prompter?.close();
    await out?.discard();
    await input.close().catch(() => undefined);
  }
}

/** A sender in the library's words (lib/sender.ts), one identity a line, and a note for demo credentials. */
export function senderLines(report: SenderReport): string {
  return `${senderText(report, { attributes: 'types' }).text}\n`;
}

/** Every recipient with its hidden policy and when it was sealed, one a line (dec and inspect). */
export function recipientLines(recipients: ReadonlyMap<string, Policy>): string {
  return [...recipients]
    .map(([id, policy]) => `  ${id}: ${describePolicy(policy)} (sealed ${when(policy.ts)})\n`)
    .join('');
}

/**
 * Walks the framing straight from the file (readFrame: preamble, header, header signature) and
 * decodes the header (NOT_POSTGUARD, UNSUPPORTED_VERSION, HEADER_TOO_LARGE, MALFORMED, TRUNCATED),
 * without a key and so without the network. The signature itself is verified by StreamUnsealer
 * with the PKG's key.
 */
async function checkContainer(input: InputFile): Promise<void> {
  const { header } = await readFrame((offset, length) => input.read(offset, length));
  decodeHeader(header);
}

/** --recipient, the only recipient, or a choice on the terminal. */
async function chooseRecipient(
  recipients: ReadonlyMap<string, Policy>,
  given: string | undefined,
  ask: (() => Prompter) | undefined,
): Promise<string> {
  const ids = [...recipients.keys()];
  if (given !== undefined) {
    if (!recipients.has(given))
      throw usage(`--recipient: ${given} is not a recipient of this file (it lists ${ids.join(', ')})`);
    return given;
  }
  if (ids.length === 1) return ids[0]!;
  if (ask === undefined)
    throw usage(`dec: the file has ${ids.length} recipients (${ids.join(', ')}); say which you are with --recipient`);
  return ask().choose("What's your recipient identifier?", ids);
}

/**
 * The attributes to disclose: exactly the recipient's policy, in its order, with the values that
 * were sealed (the header hides them, so they come from --attr, the terminal, or the recipient id).
 */
export async function disclosureFor(
  recipientId: string,
  hidden: Policy,
  attrs: ReadonlyMap<string, string>,
  ask: (() => Prompter) | undefined,
): Promise<DisclosureAttribute[]> {
  const types = new Set(hidden.con.map(({ t }) => t));
  for (const t of attrs.keys()) {
    if (!types.has(t))
      throw usage(`--attr: ${t} is not in ${recipientId}'s policy (${[...types].join(', ') || 'no attributes'})`);
  }
  if (hidden.con.length === 0)
    throw usage(`dec: ${recipientId}'s policy has no attributes; there is nothing to disclose`);
  const con: DisclosureAttribute[] = [];
  for (const attr of hidden.con) {
    const shown = hiddenValue(attr);
    if (shown.kind === 'any') {
      con.push({ t: attr.t });
      continue;
    }
    const check = (value: string): string | undefined =>
      shown.kind === 'hint' && !matchesHint(value, shown)
        ? `${attr.t}: ${JSON.stringify(value)} does not fit the hint ${JSON.stringify(attr.v)}`
        : undefined;
    const given = attrs.get(attr.t);
    const fallback = defaultValue(recipientId, attr.t);
    let value: string;
    if (given !== undefined) {
      const complaint = check(given);
      if (complaint !== undefined) throw usage(`--attr ${complaint}`);
      value = given;
    } else if (ask !== undefined) {
      const question =
        shown.kind === 'hint' ? `Enter value for ${attr.t} (hint: ${attr.v})` : `Enter value for ${attr.t}`;
      value = await ask().text(question, fallback, check);
    } else if (fallback !== undefined) {
      value = fallback;
    } else {
      throw usage(`dec: give the value of ${attr.t} with --attr ${attr.t}=<value>`);
    }
    con.push({ t: attr.t, v: value });
  }
  return con;
}

import { sealStream, startHashThread, type SealOptions } from 'postguard-ts';
import type { Policy } from 'postguard-ts';
import type { SigningKeys } from 'postguard-ts/pkg';
import {
  COMMON_HELP,
  COMMON_OPTIONS,
  bool,
  commonSettings,
  jsonText,
  onePositional,
  parseCommand,
  str,
  type CliIo,
} from './args.js';
import { Exit, usage, type ExitCode } from './exit.js';
import { createAtomicOutput, HASH_THREAD_FROM_BYTES, openInput, refuseExisting, type AtomicOutput } from './files.js';
import { describePolicy, parseRecipients, parseSignId, signingDisclosure } from './identity.js';
import { identitySession, pkgClient } from './pkg.js';
import { Progress } from './terminal.js';

export const ENC_HELP = `Usage: pg-cli enc -i <policy_json> -P <attributes_json> [options] <file>

Encrypts <file> for the recipients in the policy and signs it as the sender. The sender
proves the signing attributes in an identity session (a QR code to scan with the Yivi app),
or signs as an organisation with an API key. Writes <file>.enc unless -o says otherwise.

Options:
  -i, --identity <json>       recipients: {"<id>": [{"t": "<attribute type>", "v": "<value>"}], ...}
                              ({"<id>": {"t": <ts>, "con": [...]}} is accepted too; the file is
                              always sealed at the current time)
  -P, --pub-sign-id <json>    attribute types that sign publicly: [{"t": "<type>"}, ...]
                              (required unless --api-key)
  -S, --priv-sign-id <json>   attribute types only recipients see: [{"t": "<type>"}, ...]
  -a, --api-key <PG-...>      sign with an API key instead of a session (or set $PG_API_KEY)
JSON arguments may be given as @file to read them from a file.
${COMMON_HELP}`;

const ENC_OPTIONS = {
  ...COMMON_OPTIONS,
  identity: { type: 'string', short: 'i' },
  'pub-sign-id': { type: 'string', short: 'P' },
  'priv-sign-id': { type: 'string', short: 'S' },
  'api-key': { type: 'string', short: 'a' },
} as const;

export async function enc(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommand('enc', argv, ENC_OPTIONS);
  if (bool(values, 'help')) {
    io.stdout.write(ENC_HELP);
    return Exit.OK;
  }
  const settings = commonSettings(values, io);
  const file = onePositional('enc', positionals);

  const identity = str(values, 'identity');
  if (identity === undefined) throw usage('enc: --identity (-i) is required: who is the file for?');
  const recipients = parseRecipients(jsonText('--identity', identity));
  const pubText = str(values, 'pub-sign-id');
  const privText = str(values, 'priv-sign-id');
  const pubSignId = pubText === undefined ? [] : parseSignId(jsonText('--pub-sign-id', pubText), '--pub-sign-id');
  const privSignId =
    privText === undefined ? undefined : parseSignId(jsonText('--priv-sign-id', privText), '--priv-sign-id');
  const apiKeyValue = str(values, 'api-key') ?? io.env['PG_API_KEY'];
  const apiKey = apiKeyValue === '' ? undefined : apiKeyValue;
  if (apiKey !== undefined && !apiKey.startsWith('PG-')) throw usage('--api-key: PostGuard API keys start with "PG-"');
  if (apiKey === undefined && pubSignId.length === 0) {
    throw usage('enc: --pub-sign-id (-P) is required: which attributes do you sign with? (or sign with --api-key)');
  }
  const output = settings.output ?? `${file}.enc`;

  const { signal } = io;
  const input = await openInput(file);
  // A large file's transcript is hashed on a thread of its own; it starts while the PKG is asked.
  const hashThread = input.size >= HASH_THREAD_FROM_BYTES ? startHashThread() : undefined;
  let out: AtomicOutput | undefined;
  try {
    await refuseExisting(output, settings.force);
    const client = pkgClient(settings.pkgUrl, io.version);
    const mpk = await client.masterPublicKey({ signal });

    const ids = privSignId === undefined ? { pubSignId } : { pubSignId, privSignId };
    let keys: SigningKeys;
    if (apiKey !== undefined) {
      keys = await client.signingKeys({ apiKey }, ids, { signal });
    } else {
      const jwt = await identitySession(client, { con: signingDisclosure(pubSignId, privSignId ?? []) }, 'sign', {
        out: io.stderr,
        qr: settings.qr,
        pointerSink: settings.pointerSink,
        timeoutMs: settings.sessionTimeoutMs,
        signal,
      });
      keys = await client.signingKeys({ jwt }, ids, { signal });
    }

    const ts = Math.floor(Date.now() / 1000);
    const policy: Record<string, Policy> = {};
    for (const [id, con] of recipients.policies) policy[id] = { ts, con };
    const options: SealOptions = { policy, pubSignKey: keys.pubSignKey };
    if (keys.privSignKey !== undefined) options.privSignKey = keys.privSignKey;

    await hashThread;
    out = await createAtomicOutput(output, { force: settings.force, mode: 0o666 });
    const progress = settings.progress ? new Progress(io.stderr, 'Encrypting', input.size) : undefined;
    await sealStream(
      mpk,
      options,
      input.readable((n) => progress?.add(n), signal),
      out.writable,
    );
    progress?.finish();
    await out.commit();

    if (settings.json) {
      const signedBy = {
        public: keys.pubSignKey.policy,
        ...(keys.privSignKey === undefined ? {} : { private: keys.privSignKey.policy }),
      };
      io.stdout.write(
        `${JSON.stringify({ output, recipients: [...recipients.policies.keys()], timestamp: ts, signedBy })}\n`,
      );
    } else {
      io.stdout.write(`Encrypted ${file} to ${output} for ${[...recipients.policies.keys()].join(', ')}\n`);
      io.stdout.write(`Signed as: ${describePolicy(keys.pubSignKey.policy)}\n`);
      if (keys.privSignKey !== undefined)
        io.stdout.write(`Signed privately (recipients only) as: ${describePolicy(keys.privSignKey.policy)}\n`);
    }
    return Exit.OK;
  } finally {
    await out?.discard();
    await input.close().catch(() => undefined);
  }
}

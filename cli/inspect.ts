import { inspectCiphertext, type CiphertextInspection, type Policy } from 'postguard-ts';
import { bool, parseCommand, onePositional, str, type CliIo } from './args.js';
import { recipientLines, senderLines } from './dec.js';
import { Exit, type ExitCode } from './exit.js';
import { openInput } from './files.js';
import { pkgClient } from './pkg.js';

export const INSPECT_HELP = `Usage: pg-cli inspect [options] <file>

Shows what an encrypted file says about itself, from its header alone (the encrypted content is
never read): its mode, every recipient with the hidden policy a key is requested for, and the
sender it claims. Needs no key and no network. The header's signature is checked only with
--pkg; the claimed sender stays a claim either way (only decrypting the whole file verifies it).

Options:
  -p, --pkg <url>   verify the header signature with this PKG's verifying key (the only network use)
      --json        print the result on stdout as one JSON object
  -h, --help        show this help
`;

const INSPECT_OPTIONS = {
  pkg: { type: 'string', short: 'p' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function inspect(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const { values, positionals } = parseCommand('inspect', argv, INSPECT_OPTIONS);
  if (bool(values, 'help')) {
    io.stdout.write(INSPECT_HELP);
    return Exit.OK;
  }
  const file = onePositional('inspect', positionals);
  const pkgUrl = str(values, 'pkg');
  // Checked before the file is read: a bad URL is a usage error whatever the file holds.
  const client = pkgUrl === undefined ? undefined : pkgClient(pkgUrl, io.version);
  const input = await openInput(file);
  let found: CiphertextInspection;
  try {
    const read = (offset: number, length: number) => input.read(offset, length);
    // The framing is read and checked before the PKG is asked: garbage fails without the network.
    found = await inspectCiphertext(read);
    if (client !== undefined) {
      // Every verifying key of the PKG's key set: a file signed under an older, current key verifies too.
      const vk = await client.verificationKeys({ signal: io.signal });
      found = await inspectCiphertext(read, { vk });
    }
  } finally {
    await input.close().catch(() => undefined);
  }

  if (bool(values, 'json')) {
    io.stdout.write(`${JSON.stringify(inspectionJson(file, found, pkgUrl))}\n`);
    return Exit.OK;
  }
  const { mode } = found;
  const lines = [`File: ${file}\n`];
  lines.push(
    mode.type === 'Streaming'
      ? `Mode: streaming, segments of ${mode.segmentSize} bytes\n`
      : `Mode: in-memory, ${mode.size} bytes\n`,
  );
  lines.push(
    found.headerSignature === 'verified'
      ? `Header signature: verified with the PKG at ${pkgUrl}\n`
      : 'Header signature: not checked (no PKG key; give --pkg to check it)\n',
  );
  lines.push(senderLines(found.sender), `  ${found.sender.explanation}\n`);
  lines.push('Encrypted for:\n', recipientLines(found.recipients));
  io.stdout.write(lines.join(''));
  return Exit.OK;
}

/** `--json`: the inspection as plain JSON (the size hint's u64s as decimal strings). */
function inspectionJson(file: string, found: CiphertextInspection, pkgUrl: string | undefined) {
  const { mode } = found;
  const recipients: Record<string, Policy> = Object.fromEntries(found.recipients);
  return {
    file,
    mode:
      mode.type === 'Streaming'
        ? {
            type: mode.type,
            segmentSize: mode.segmentSize,
            sizeHint: [String(mode.sizeHint[0]), mode.sizeHint[1] === undefined ? null : String(mode.sizeHint[1])],
          }
        : { type: mode.type, size: mode.size },
    framingBytes: found.framingBytes,
    headerSignature: found.headerSignature,
    ...(found.headerSignature === 'verified' ? { pkg: pkgUrl } : {}),
    sender: found.sender.standing,
    claimedSender: found.claimedSender,
    recipients,
  };
}

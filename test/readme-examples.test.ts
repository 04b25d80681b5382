import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expose } from 'comlink';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { StreamUnsealer, seal, sealStream, senderReport, type Policy, type VerificationResult } from '../lib/index.js';
import { extractSigningKey, extractUsk } from '../lib/keys.js';
import type { IdentitySession, SessionStatus } from '../lib/pkg/index.js';
import { readZip } from '../client/testing.js';
import { parseCommand as parsePgPkg } from '../server/config.js';
import { createApiKey, createApiKeyStore, type ApiKeyStore } from '../server/db.js';
import { createTestSchema, type TestSchema } from '../server/db/testing.js';
import { parseCli as parseStandin, USAGE as STANDIN_USAGE } from '../devtools/standin/cli.js';
import { requestedType, satisfies, type AttributeConDisCon } from '../devtools/standin/protocol.js';
import type { PendingSessionView } from '../devtools/standin/routes/knobs.js';
import { cancel, chooseDisclosure, connect, sendDisclosure, type AttributeValues } from '../devtools/standin/wallet.js';
import { parseCli as parseStorage, USAGE as STORAGE_USAGE } from '../devtools/storage/cli.js';
import { parseCli as parseDev, USAGE as DEV_USAGE } from '../devtools/dev/cli.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { runCli as runPgCli } from '../cli/run.js';
import { PostGuardWorker } from '../worker/client.js';
import { cryptoWorkerApi } from '../worker/worker-api.js';
import {
  checkShell,
  findReadmes,
  isScript,
  readBlocks,
  readJson,
  runnable,
  shellCommands,
  typeCheckOnThread,
  where,
  type Block,
  type BlockDiagnostic,
  type BlockResult,
  type ShellWorld,
} from './readme-examples.js';
import { collector } from './streams.js';

/**
 * Every code block of every README.md is checked (test/readme-examples.ts finds them):
 *
 * - TypeScript and JavaScript blocks type-check against the library's sources, with the names a
 *   block uses but does not define declared by its preamble (an HTML comment above it), and fail
 *   at their README line;
 * - the blocks that can run in Node run, against a real PKG and the stand-in Yivi server on
 *   loopback (API keys in a private PostgreSQL schema, the storage stand-in for the SDK), with a
 *   phone that answers every identity session the way the stand-in's wallet does, and each run's
 *   outcome checked (the file opens, the sender is verified, the upload arrives). The browser's
 *   module Worker is played by the crypto worker's API at the other end of a MessageChannel, as in
 *   worker/client.test.ts; the examples' https hosts are routed to the loopback servers, and no
 *   other host can be reached. Blocks that need a browser (service workers) are type-checked only;
 * - shell blocks are not run, but every command in them must name what exists: npm scripts, our
 *   bins with their subcommands and options (asked from their own parsers' help), files run by
 *   node, tsx, vitest or Playwright, Playwright projects;
 * - JSON blocks parse.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DEMO_EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';
const BOB = 'bob@example.com';

const readmes = findReadmes();
const blocks = readmes.flatMap(readBlocks);
const key = (block: Block): string => block.id ?? `${block.readme}|${block.code.split('\n')[0]!}`;

/**
 * Preambles kept here rather than above their block: a README section another change owns. Keyed
 * by README and the block's first line.
 */
const TEST_PREAMBLES: Readonly<Record<string, string>> = {
  "lib/README.md|const pg = new PostGuardWorker({ workerUrl: '/postguard-crypto-worker.js' });": [
    "declare const PostGuardWorker: typeof import('postguard-ts/worker').PostGuardWorker;",
    "declare const registerDecryptingServiceWorker: typeof import('postguard-ts/sw').registerDecryptingServiceWorker;",
  ].join('\n'),
};
for (const block of blocks) {
  const preamble = TEST_PREAMBLES[key(block)];
  if (preamble !== undefined && block.preamble === '') block.preamble = preamble;
}

/** The blocks that need a browser, and why: type-checked only. */
const BROWSER_ONLY: Readonly<Record<string, string>> = {
  'client-send-receive': 'draws a QR code into the page and saves through a service worker',
  'app-send-ts': 'a page: the form, the QR code, the kept uploads (e2e/consumer/send-receive.spec.ts runs it)',
  'app-receive-ts': 'a page: the QR code and the files (e2e/consumer/send-receive.spec.ts runs it)',
  'app-vite-config': "Vite's configuration of the two pages (e2e/consumer/send-receive.spec.ts builds them)",
  'vite-service-worker': 'registers a service worker',
  'worker-service-worker': 'registers a service worker',
  'worker-seeking': 'a service worker answering a <video>',
  "lib/README.md|const pg = new PostGuardWorker({ workerUrl: '/postguard-crypto-worker.js' });":
    'registers a service worker',
};

const scripts = blocks.filter(isScript);

/** A block with a known error, checked with the others: the check reports at README lines. */
const canary: Block = {
  readme: 'canary.md',
  line: 10,
  lang: 'ts',
  code: "import { seal } from 'postguard-ts';\nconst n: number = seal;",
  id: undefined,
  preamble: 'declare const unused: string;',
  preambleLine: 8,
};
const typeChecked = typeCheckOnThread([...scripts, canary]);
typeChecked.catch(() => undefined); // reported by the type-check tests

it('finds every README and its blocks', () => {
  expect(readmes).toEqual(
    expect.arrayContaining([
      'README.md',
      'cli/README.md',
      'e2e/README.md',
      'lib/README.md',
      'sdk/README.md',
      'server/README.md',
      'devtools/README.md',
      'devtools/standin/README.md',
      'devtools/storage/README.md',
      'worker/README.md',
    ]),
  );
  expect(new Set(blocks.map((b) => b.id).filter((id) => id !== undefined)).size, 'example ids are unique').toBe(
    blocks.filter((b) => b.id !== undefined).length,
  );
  // HTML blocks are pages: only the API-key rule below reads them.
  const unknown = blocks.filter(
    (b) => !['ts', 'typescript', 'js', 'javascript', 'sh', 'json', 'html'].includes(b.lang),
  );
  expect(
    unknown.map((b) => `${where(b)}: \`\`\`${b.lang}`),
    'every block says its language',
  ).toEqual([]);
  for (const k of [...Object.keys(TEST_PREAMBLES), ...Object.keys(BROWSER_ONLY)])
    expect(blocks.map(key), `${k} names no README block any more`).toContain(k);
});

/** Code for a page: what imports the browser entries, and HTML. */
const forPages = blocks.filter(
  (b) =>
    b.lang === 'html' ||
    (isScript(b) && /from '(?:postguard-ts\/(?:worker|sw|pkg|browser)|\.\/postguard\.js)'/.test(b.code)),
);

it('no page example holds an API key: they are for servers, and anyone can read a page', () => {
  expect(forPages.length).toBeGreaterThan(3);
  expect(forPages.filter((b) => /apiKey|['"`]PG-/.test(b.code)).map(where)).toEqual([]);
});

describe('JSON blocks parse', () => {
  it.each(blocks.filter((b) => b.lang === 'json').map((b) => [where(b), b] as const))('%s', (_, block) => {
    expect(() => JSON.parse(block.code) as unknown).not.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// Shell blocks

/** pg-cli's help, through its own dispatcher (`pg-cli help <command>`). */
async function pgCliHelp(path: readonly string[]): Promise<string | undefined> {
  let out = '';
  const sink = { write: (text: string) => void (out += text), isTTY: false };
  const code = await runPgCli(path.length === 0 ? ['--help'] : ['help', ...path], {
    stdin: process.stdin,
    stdout: sink,
    stderr: { write: () => undefined, isTTY: false },
    env: {},
    signal: new AbortController().signal,
    version: '0.0.0',
  });
  return code === 0 ? out : undefined;
}

async function shellWorld(): Promise<ShellWorld> {
  const root = readJson<{ scripts: Record<string, string>; workspaces: string[] }>('package.json');
  const scripts = new Map<string, ReadonlySet<string>>([['', new Set(Object.keys(root.scripts))]]);
  const bins = new Set<string>();
  for (const folder of root.workspaces) {
    const pkg = readJson<{ name: string; scripts?: Record<string, string>; bin?: Record<string, string> }>(
      `${folder}/package.json`,
    );
    scripts.set(pkg.name, new Set(Object.keys(pkg.scripts ?? {})));
    for (const bin of Object.keys(pkg.bin ?? {})) bins.add(bin);
  }
  const playwright = (await import('../playwright.config.js')).default;
  return {
    bins,
    scripts,
    playwrightProjects: (playwright.projects ?? []).map((p) => p.name ?? ''),
    subcommandDepth: (bin, args) => {
      const first = args[0];
      if (
        first === undefined ||
        first.startsWith('-') ||
        bin === 'pg-standin' ||
        bin === 'pg-storage' ||
        bin === 'pg-dev'
      )
        return 0;
      return bin === 'pg-pkg' && (first === 'api-key' || first === 'audit') ? 2 : 1;
    },
    help: async (bin, path) => {
      switch (bin) {
        case 'pg-pkg':
          try {
            const command = parsePgPkg([...path, '--help'], {});
            return command.kind === 'help' ? command.text : undefined;
          } catch {
            return undefined;
          }
        case 'pg-cli':
          return pgCliHelp(path);
        case 'pg-standin':
          return path.length === 0 && parseStandin(['--help']).kind === 'help' ? STANDIN_USAGE : undefined;
        case 'pg-storage':
          return path.length === 0 && parseStorage(['--help']).kind === 'help' ? STORAGE_USAGE : undefined;
        case 'pg-dev':
          return path.length === 0 && parseDev(['--help']).kind === 'help' ? DEV_USAGE : undefined;
        default:
          return undefined;
      }
    },
  };
}

describe('shell blocks name only what exists', () => {
  let world: ShellWorld;
  beforeAll(async () => {
    world = await shellWorld();
  });

  const problems = async (block: Block): Promise<string[]> => {
    const found: string[] = [];
    for (const command of shellCommands(block))
      for (const problem of await checkShell(world, command)) found.push(`${block.readme}:${command.line}: ${problem}`);
    return found;
  };

  it('the check refuses what does not exist', async () => {
    const bad: Block = {
      readme: 'bad.md',
      line: 1,
      lang: 'sh',
      id: undefined,
      preamble: '',
      preambleLine: 0,
      code: [
        'npm run no-such-script',
        'pg-pkg api-key list | revoke --id <id>',
        'pg-pkg serve --port 1',
        'pg-pkg server --no-such-flag',
        'pg-cli enc --api-key PG-x --nope a.txt',
        'pg-standin --port 1 --no-knobs',
        'pg-nothing',
        'npx playwright test --project=firefox e2e/none.spec.ts',
        'npm run build -w no-such-workspace',
      ].join('\n'),
    };
    expect(await problems(bad)).toEqual([
      'bad.md:1: npm run no-such-script: no such script in the root package.json',
      'bad.md:2: revoke: not a command the READMEs use (npm, npx, node, docker, cd, cp, mkdir or one of our bins)',
      'bad.md:3: pg-pkg serve: no such command',
      'bad.md:4: pg-pkg server: --no-such-flag is not an option (its --help does not list it)',
      'bad.md:5: pg-cli enc: --nope is not an option (its --help does not list it)',
      'bad.md:6: pg-standin: --no-knobs is not an option (its --help does not list it)',
      'bad.md:7: pg-nothing is not a bin of any published package',
      'bad.md:8: npx playwright test e2e/none.spec.ts: no such file or folder',
      'bad.md:8: npx playwright test --project=firefox: no such project in playwright.config.ts',
      'bad.md:9: npm: no workspace no-such-workspace',
    ]);
  });

  it.each(blocks.filter((b) => b.lang === 'sh').map((b) => [where(b), b] as const))('%s', async (_, block) => {
    expect(await problems(block)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Running

/** What the blocks run against. */
interface Stack {
  pkg: RunningPkg;
  storage: RunningStorage;
  apiKey: string;
  /** Identity sessions the phone answered since the block started: who disclosed (or undefined: refused). */
  answered: Array<string | undefined>;
}

/** A block's run: the values of its preamble's names, and what to check of its outcome. */
interface Run {
  values: Record<string, unknown>;
  check(result: BlockResult): void | Promise<void>;
  /** Working folder and environment for the block (restored afterwards). */
  cwd?: string;
  env?: Record<string, string>;
  cleanup?(): Promise<void>;
}

const message = (n: number, seed = 1): Uint8Array<ArrayBuffer> =>
  Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

/** A response whose body is what `sink` has collected by the time the body is read. */
const responseOf = (sink: { bytes(): Uint8Array }): Response =>
  ({
    get body() {
      return new Response(sink.bytes() as Uint8Array<ArrayBuffer>).body;
    },
  }) as Response;

/** Byte equality without toEqual's element-by-element walk (seconds for a few hundred KiB). */
const expectBytes = (actual: unknown, expected: Uint8Array, what: string) => {
  expect(actual, what).toBeInstanceOf(Uint8Array);
  const same = Buffer.from(actual as Uint8Array).equals(Buffer.from(expected));
  expect(same, `${what} differs (${(actual as Uint8Array).length} bytes, expected ${expected.length})`).toBe(true);
};

const alicesPolicy = (ts: number): Policy => ({ ts, con: [{ t: EMAIL, v: ALICE }] });

/** Seal options for Bob from Alice, and Bob's key, made with the PKG's master keys. */
function sealingFor(pkg: RunningPkg) {
  const ts = Math.floor(Date.now() / 1000);
  const policy = { [BOB]: { ts, con: [{ t: EMAIL, v: BOB }] } };
  const pubSignKey = { key: extractSigningKey(pkg.keys.sk, alicesPolicy(ts)), policy: alicesPolicy(ts) };
  return { ts, policy, pubSignKey, usk: extractUsk(pkg.keys.msk, policy[BOB]) };
}

const expectVerifiedAlice = (result: unknown) => {
  const verified = result as VerificationResult;
  expect(verified).toMatchObject({ contentSigner: 'public', bound: true });
  expect(verified.public.con).toEqual([{ t: EMAIL, v: ALICE }]);
  expect(senderReport(verified).standing).toBe('verified');
};

const RUNS: Readonly<Record<string, (stack: Stack) => Run | Promise<Run>>> = {
  'root-import': () => ({ values: {}, check: () => undefined }),

  'vite-config': () => ({
    values: {},
    check: ({ exports }) => {
      const config = exports['default'] as { plugins: Array<{ name: string }> };
      expect(config.plugins.map((p) => p.name)).toEqual([expect.stringContaining('postguard')]);
    },
  }),

  // lib/README.md: Alice signs with a session and seals for Bob's address; Bob's key comes from his session.
  'page-seal-open': (stack) => {
    const plain = message(300_000);
    const sealed = collector();
    const opened = collector();
    const shown: string[] = [];
    return {
      values: {
        file: new File([plain], 'report.pdf'),
        writable: sealed.writable,
        response: responseOf(sealed),
        outputWritable: opened.writable,
        showQr: (session: IdentitySession) => shown.push(session.qrText),
      },
      check: ({ vars }) => {
        expect(stack.answered).toEqual([ALICE, BOB]);
        expect(shown).toHaveLength(2);
        expect(opened.state()).toBe('closed');
        expectBytes(opened.bytes(), plain, 'what Bob opened');
        expectVerifiedAlice(vars['sender']);
      },
    };
  },

  // lib/README.md, the plaintext as a stream: a file sealed for Bob, opened with its size known.
  'stream-open': async ({ pkg }) => {
    const { policy, pubSignKey, usk } = sealingFor(pkg);
    const plain = message(600_000, 5);
    const sealed = collector();
    await sealStream(pkg.keys.mpk, { policy, pubSignKey }, new Blob([plain]).stream(), sealed.writable);
    const opened = collector();
    return {
      values: {
        file: new File([sealed.bytes() as BlobPart], 'report.pdf'),
        vk: pkg.keys.vk,
        usk,
        recipientId: BOB,
        sink: opened.writable,
      },
      check: ({ vars }) => {
        expect(vars['size']).toBe(plain.length);
        expect(opened.state()).toBe('closed');
        expectBytes(opened.bytes(), plain, 'the opened plaintext');
        expectVerifiedAlice(vars['sender']);
      },
    };
  },

  // lib/README.md, random access: the last 22 bytes of a file sealed for Bob.
  'random-access': async ({ pkg }) => {
    const { policy, pubSignKey, usk } = sealingFor(pkg);
    const plain = message(700_000, 6);
    const sealed = collector();
    await sealStream(pkg.keys.mpk, { policy, pubSignKey }, new Blob([plain]).stream(), sealed.writable);
    return {
      values: { file: new File([sealed.bytes() as BlobPart], 'archive.zip'), vk: pkg.keys.vk, usk, recipientId: BOB },
      check: ({ vars }) => expectBytes(vars['tail'], plain.subarray(plain.length - 22), 'the last 22 bytes'),
    };
  },

  // worker/README.md, the crypto worker: both modes, in the worker, for Bob with keys from the PKG's master keys.
  'worker-calls': ({ pkg }) => {
    const { policy, pubSignKey, usk } = sealingFor(pkg);
    const bytes = message(70_000, 2);
    const fileBytes = message(300_000, 3);
    const sealed = collector();
    const opened = collector();
    return {
      values: {
        mpk: pkg.keys.mpk,
        vk: pkg.keys.vk,
        policy,
        pubSignKey,
        bytes,
        file: new File([fileBytes], 'big.bin'),
        ciphertextSink: sealed.writable,
        plaintextSink: opened.writable,
        recipientId: BOB,
        usk,
        response: responseOf(sealed),
      },
      check: ({ vars }) => {
        expectBytes(vars['plain'], bytes, 'the in-memory plaintext');
        expect((vars['policies'] as Map<string, Policy>).get(BOB)).toEqual({
          ts: policy[BOB].ts,
          con: [{ t: EMAIL, v: '' }],
        });
        expect(vars['sender']).toEqual(pubSignKey.policy);
        expectVerifiedAlice(vars['verified']);
        expectVerifiedAlice(vars['verified2']);
        expectBytes(opened.bytes(), fileBytes, 'the streamed plaintext');
      },
    };
  },

  // worker/README.md, the PKG client: Bob's key from a session, Alice's signing keys from hers.
  'worker-pkg-client': async (stack) => {
    const { policy, pubSignKey } = sealingFor(stack.pkg);
    const plain = message(5000, 4);
    const ct = await seal(stack.pkg.keys.mpk, { policy, pubSignKey }, plain);
    const pg = new PostGuardWorker();
    const qrElement = { innerHTML: '' };
    const mobileButton = { href: '' };
    const cancelButton = { onclick: null };
    const statuses: SessionStatus[] = [];
    const rendered: IdentitySession[] = [];
    return {
      values: {
        pg,
        ct,
        recipientId: BOB,
        signal: new AbortController().signal,
        qrElement,
        mobileButton,
        cancelButton,
        show: (status: SessionStatus) => statuses.push(status),
        renderQr: (session: IdentitySession) => rendered.push(session),
      },
      check: ({ vars }) => {
        expect(stack.answered).toEqual([BOB, ALICE]);
        expect(vars['source']).toBe('session');
        expectBytes(vars['plain'], plain, 'the plaintext');
        expectVerifiedAlice(vars['verified']);
        expect(qrElement.innerHTML).toMatch(/^<svg/);
        expect(mobileButton.href).toContain('yivi');
        expect(cancelButton.onclick).toBeTypeOf('function');
        expect(statuses).toContain('DONE');
        expect(rendered).toHaveLength(1);
        expect((vars['pubSignKey'] as { policy: Policy }).policy.con).toEqual([{ t: EMAIL, v: ALICE }]);
      },
      cleanup: () => Promise.resolve(pg.terminate()),
    };
  },

  // sdk/README.md: three files sealed for two recipients, signed with the API key, uploaded.
  sdk: async ({ pkg, storage, apiKey }) => {
    const dir = await mkdtemp(join(tmpdir(), 'readme-sdk-'));
    const pdf = message(40_000, 5);
    const csv = message(9_000, 6);
    const png = message(12_000, 7);
    await writeFile(join(dir, 'report.pdf'), pdf);
    await writeFile(join(dir, 'x.csv'), csv);
    return {
      values: { png },
      cwd: dir,
      env: { PG_API_KEY: apiKey },
      cleanup: () => rm(dir, { recursive: true, force: true }),
      check: async ({ vars }) => {
        const uuid = vars['uuid'] as string;
        const mails = (await storage.outbox()).filter((m) => m.uuid === uuid);
        expect(mails.map((m) => m.to).sort()).toEqual(['citizen@example.com', 'desk@gemeente.nl']);
        expect(mails.every((m) => m.message === 'Your documents' && m.senderVerified)).toBe(true);
        // The citizen opens what was stored: the key for her address at the file's timestamp.
        const stored = await fetch(`${storage.url}/filedownload/${uuid}`);
        const unsealer = await StreamUnsealer.new(stored.body!, pkg.keys.vk);
        const hidden = unsealer.inspect_header().get('citizen@example.com')!;
        const usk = extractUsk(pkg.keys.msk, { ts: hidden.ts, con: [{ t: EMAIL, v: 'citizen@example.com' }] });
        const zip = collector();
        const signer = await unsealer.unseal('citizen@example.com', usk, zip.writable);
        expect(signer.public.con).toContainEqual({ t: EMAIL, v: 'news@example.org' });
        const files = readZip(zip.bytes());
        expect([...files.keys()]).toEqual(['report.pdf', 'scan.png', 'export.csv']);
        expectBytes(files.get('report.pdf'), pdf, 'report.pdf');
        expectBytes(files.get('scan.png'), png, 'scan.png');
        expectBytes(files.get('export.csv'), csv, 'export.csv');
      },
    };
  },

  // sdk/README.md: the folder keeper; nothing is pending at first, then one upload, finished, leaves nothing kept.
  'sdk-resume': async ({ storage, apiKey }) => {
    const dir = await mkdtemp(join(tmpdir(), 'readme-sdk-resume-'));
    return {
      values: { pdf: message(30_000, 8) },
      cwd: dir,
      env: { PG_API_KEY: apiKey },
      cleanup: () => rm(dir, { recursive: true, force: true }),
      check: async ({ vars }) => {
        const stored = await fetch(`${storage.url}/filedownload/${vars['uuid'] as string}`);
        expect(stored.status).toBe(200);
        expect((await stored.arrayBuffer()).byteLength).toBeGreaterThan(30_000);
      },
    };
  },

  'standin-in-code': () => ({
    values: {},
    check: ({ vars }) => {
      expect(vars['proofStatus']).toBe('VALID');
      expect(String(vars['jwt']).split('.')).toHaveLength(3);
    },
  }),

  'storage-in-code': ({ pkg }) => ({ values: { vk: pkg.keys.vk }, check: () => undefined }),
};

/** The modules the blocks may import, under the names the READMEs use (the library's through its sources). */
const MODULES: Readonly<Record<string, () => Promise<unknown>>> = {
  'postguard-ts': () => import('postguard-ts'),
  'postguard-ts/pkg': () => import('postguard-ts/pkg'),
  'postguard-ts/worker': () => import('postguard-ts/worker'),
  'postguard-ts/vite': () => import('postguard-ts/vite'),
  '@postguard-ts/sdk': () => import('../sdk/index.js'),
  './devtools/standin/app.js': () => import('../devtools/standin/app.js'),
  './devtools/standin/testing.js': () => import('../devtools/standin/testing.js'),
  './devtools/standin/wallet.js': () => import('../devtools/standin/wallet.js'),
  './devtools/storage/app.js': () => import('../devtools/storage/app.js'),
  './devtools/storage/testing.js': () => import('../devtools/storage/testing.js'),
  'node:fs': () => import('node:fs'),
  'node:fs/promises': () => import('node:fs/promises'),
  'node:stream': () => import('node:stream'),
};

/** The hosts the examples name, and where they are served here. */
const HOSTS: Readonly<Record<string, (stack: Stack) => string>> = {
  'https://pkg.example.org': ({ pkg }) => pkg.url,
  'https://pkg.postguard.eu': ({ pkg }) => pkg.url,
  'https://fileshare.postguard.eu': ({ storage }) => storage.url,
};

/** People whose phones hold a Yivi e-mail credential. */
const PEOPLE: readonly AttributeValues[] = [ALICE, BOB].map((address) => ({ [EMAIL]: address, [DEMO_EMAIL]: address }));

const meets = (person: AttributeValues, disclose: AttributeConDisCon): boolean =>
  disclose.every((discon) =>
    discon.some((con) =>
      con.every((ar) => {
        const type = requestedType(ar);
        return Object.hasOwn(person, type) && satisfies(ar, type, person[type] ?? null);
      }),
    ),
  );

describe('blocks that run in Node run', () => {
  const realFetch = globalThis.fetch;
  let schema: TestSchema;
  let store: ApiKeyStore;
  let stack: Stack;
  let phoneStop = false;
  let phone: Promise<void> = Promise.resolve();
  const phoneErrors: unknown[] = [];
  const ports: MessagePort[] = [];

  /**
   * The phones: every new session at the stand-in is answered by the person whose credential meets
   * the request (as that person's wallet would, devtools/standin/wallet.ts), or refused when nobody's does.
   */
  async function answerSessions(): Promise<void> {
    const seen = new Set<string>();
    while (!phoneStop) {
      try {
        const listed = await realFetch(`${stack.pkg.yivi.url}/standin/sessions`);
        const { sessions } = (await listed.json()) as { sessions: PendingSessionView[] };
        for (const session of sessions) {
          if (session.status !== 'INITIALIZED' || seen.has(session.clientToken)) continue;
          seen.add(session.clientToken);
          const connection = await connect(session.sessionPtr);
          const person = PEOPLE.find((p) => meets(p, connection.request.disclose));
          if (person === undefined) {
            stack.answered.push(undefined);
            await cancel(session.sessionPtr);
          } else {
            stack.answered.push(person[EMAIL]!);
            await sendDisclosure(connection, chooseDisclosure(connection.request.disclose, person));
          }
        }
      } catch (error) {
        phoneErrors.push(error);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** The browser's module Worker, played by the crypto worker's API over a MessageChannel. */
  function WorkerInNode(): unknown {
    const { port1, port2 } = new MessageChannel();
    expose(cryptoWorkerApi(), port1);
    ports.push(port1, port2);
    return Object.assign(port2, { terminate: () => (port1.close(), port2.close()) });
  }

  /** fetch, with the examples' hosts served on loopback and every other host out of reach. */
  const routedFetch: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const target = HOSTS[url.origin];
    if (target !== undefined) {
      const moved = new URL(`${url.pathname}${url.search}`, target(stack));
      return input instanceof Request ? realFetch(new Request(moved, input), init) : realFetch(moved, init);
    }
    if (url.hostname !== '127.0.0.1') return Promise.reject(new TypeError(`an example fetched ${url.origin}`));
    return realFetch(input, init);
  };

  beforeAll(async () => {
    schema = await createTestSchema();
    const apiKey = await createApiKey(schema.url, { email: 'news@example.org', org: 'Example BV' });
    store = createApiKeyStore(schema.url, { emailAttribute: EMAIL });
    const pkg = await startPkg({ apiKeys: store });
    const storage = await startStorage({ pkgUrl: pkg.url, chunkSize: 64 * 1024 });
    stack = { pkg, storage, apiKey, answered: [] };
    phone = answerSessions();
    vi.stubGlobal('fetch', routedFetch);
    vi.stubGlobal('Worker', WorkerInNode);
  }, 60_000);

  afterAll(async () => {
    vi.unstubAllGlobals();
    phoneStop = true;
    await phone;
    await stack?.storage.close();
    await stack?.pkg.close();
    await store?.close();
    await schema?.drop();
  });

  afterEach(() => {
    for (const port of ports.splice(0)) port.close();
    expect(phoneErrors.splice(0)).toEqual([]);
  });

  const runs = scripts.filter((b) => BROWSER_ONLY[key(b)] === undefined);

  it('every block either runs here or needs a browser', () => {
    expect(runs.filter((b) => b.id === undefined || RUNS[b.id] === undefined).map(where)).toEqual([]);
    expect(Object.keys(RUNS).sort()).toEqual(runs.map((b) => b.id!).sort());
  });

  it.each(runs.filter((b) => b.id !== undefined && RUNS[b.id] !== undefined).map((b) => [where(b), b] as const))(
    '%s',
    async (_, block) => {
      const code = runnable(block);
      const modules = new Map<string, unknown>();
      for (const specifier of code.imports) {
        const load = MODULES[specifier];
        if (load === undefined) throw new Error(`${where(block)} imports ${specifier}: add it to MODULES`);
        modules.set(specifier, await load());
      }
      stack.answered = [];
      const run = await RUNS[block.id!]!(stack);
      const cwd = process.cwd();
      const env = Object.entries(run.env ?? {});
      try {
        for (const [name, value] of env) vi.stubEnv(name, value);
        if (run.cwd !== undefined) process.chdir(run.cwd);
        let result: BlockResult;
        try {
          result = await code.run(modules, run.values);
        } catch (error) {
          throw new Error(`${where(block)} failed when run: ${String(error)}`, { cause: error });
        } finally {
          process.chdir(cwd);
          vi.unstubAllEnvs();
        }
        await run.check(result);
      } finally {
        await run.cleanup?.();
      }
    },
  );
});

// Last, so that the checking thread (started above) has worked while the rest ran.
describe('TypeScript and JavaScript blocks type-check against the sources', () => {
  let diagnostics: BlockDiagnostic[][];
  beforeAll(async () => {
    diagnostics = await typeChecked;
  }, 120_000);

  it('reports an error at its README line', () => {
    expect(diagnostics.at(-1)!.map((d) => d.at)).toEqual(['canary.md:11']);
  });

  it.each(scripts.map((b, i) => [where(b), i] as const))('%s', (_, i) => {
    expect(diagnostics[i]!.map((d) => `${d.at}: ${d.message}`)).toEqual([]);
  });
});

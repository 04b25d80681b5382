// How the API reference (`npm run docs`, scripts/docs.ts) is laid out for a reader: one table, so
// that the sources need no TypeDoc tags for it and a new export lands somewhere sensible by itself.
//
// The index groups the entries: "Start here" holds what an app uses first (send and receive,
// the worker, the service worker), then the format and key layers, then tools. In
// `postguard-ts/client`, what an app rarely touches (the upload keepers' parts, the ZIP reader,
// the crypto engines) is grouped under "Internals: …", after the app's API, instead of in one flat
// list of classes and interfaces. Everything stays documented and linkable.
import { Comment, CommentTag, Converter, ReflectionKind, type Application, type DeclarationReflection } from 'typedoc';

/** The index's groups of entries, in order; an entry not listed goes under "More". */
export const ENTRY_GROUPS: ReadonlyArray<readonly [group: string, specifiers: readonly string[]]> = [
  [
    'Start here',
    [
      'postguard-ts/client',
      'postguard-ts/worker',
      'postguard-ts/browser',
      'postguard-ts/sw',
      'postguard-ts/sw/install',
    ],
  ],
  ['Node', ['@postguard-ts/sdk']],
  ['The format and keys', ['postguard-ts', 'postguard-ts/keys', 'postguard-ts/format', 'postguard-ts/pkg']],
  ['Build tools', ['postguard-ts/vite']],
];

/** `postguard-ts/client`'s exports that are internals, by group; the rest is the app's API. */
export const CLIENT_INTERNALS: Readonly<Record<string, readonly string[]>> = {
  'Internals: upload keepers': [
    'keeperOver',
    'memoryBackend',
    'checkUploadId',
    'DEFAULT_GRACE_MS',
    'MAX_RECORD_BYTES',
    'KeeperBackend',
    'KeptBytes',
    'ListOptions',
    'UploadRecord',
    'BrowserKeeperBackend',
  ],
  'Internals: ZIP reader': [
    'listZipEntries',
    'zipEntryStream',
    'DEFAULT_MAX_ZIP_ENTRIES',
    'DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES',
    'ZipEntry',
    'ZipReadable',
    'ListZipEntriesOptions',
    'ZipEntryStreamOptions',
  ],
  'Internals: crypto engines': ['inlineEngine', 'CryptoEngine', 'EngineUnsealer'],
};

/** The order of groups on a page: the app's own first, internals last. */
export const GROUP_ORDER = [...ENTRY_GROUPS.map(([group]) => group), 'More', '*', ...Object.keys(CLIENT_INTERNALS)];

/**
 * The index page's list of the entries by group (appended to docs-start.md), so the page a reader
 * opens first shows the groups, not only the sidebar.
 */
export function entryIndex(specifiers: readonly string[]): string {
  const listed = new Set(ENTRY_GROUPS.flatMap(([, members]) => members));
  const groups: Array<readonly [string, readonly string[]]> = [
    ...ENTRY_GROUPS.map(([group, members]) => [group, members.filter((m) => specifiers.includes(m))] as const),
    ['More', specifiers.filter((s) => !listed.has(s))],
  ];
  const lines = ['', '## The entries', ''];
  for (const [group, members] of groups) {
    if (members.length === 0) continue;
    lines.push(`### ${group}`, '', ...members.map((m) => `- {@link "${m}" | \`${m}\`}`), '');
  }
  const internals = Object.keys(CLIENT_INTERNALS)
    .map((g) => `"${g}"`)
    .join(', ');
  lines.push(
    `In \`postguard-ts/client\`, the parts an app rarely touches are grouped after the app's API: ${internals}.`,
    '',
  );
  return lines.join('\n');
}

const groupTag = (group: string) => new CommentTag('@group', [{ kind: 'text', text: group }]);

function tag(reflection: DeclarationReflection, group: string): void {
  reflection.comment ??= new Comment();
  reflection.comment.blockTags = reflection.comment.blockTags.filter((t) => t.tag !== '@group');
  reflection.comment.blockTags.push(groupTag(group));
}

/** Tags the entries and the client's internals with their groups before TypeDoc groups them. */
export function applyDocGroups(app: Application): void {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    const group = new Map(ENTRY_GROUPS.flatMap(([name, specifiers]) => specifiers.map((s) => [s, name] as const)));
    const internal = new Map(
      Object.entries(CLIENT_INTERNALS).flatMap(([name, members]) => members.map((m) => [m, name] as const)),
    );
    for (const module of context.project.getReflectionsByKind(ReflectionKind.Module) as DeclarationReflection[]) {
      tag(module, group.get(module.name) ?? 'More');
      if (module.name !== 'postguard-ts/client') continue;
      for (const child of module.children ?? []) {
        const name = internal.get(child.name);
        if (name !== undefined) tag(child, name);
      }
    }
  });
}

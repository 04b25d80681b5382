import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import ts from 'typescript';

/**
 * The READMEs' code blocks as code (used by test/readme-examples.test.ts): found in the Markdown,
 * type-checked against the library's sources in one TypeScript program, turned into functions that
 * run in Node, and shell lines read as commands.
 *
 * A TypeScript or JavaScript block may have a preamble, an HTML comment right above it (hidden where
 * the README is rendered) that declares what the block uses without defining it:
 *
 *   <!-- example page-seal-open (declarations for test/readme-examples.test.ts)
 *   import type { IdentitySession } from 'postguard-ts/pkg';
 *   declare const file: File;
 *   -->
 *
 * The preamble is prepended to the block for the type check. When the block runs, each `declare`d
 * name is given the value the test's fixture for that id provides; the preamble's imports are type
 * imports only. A block that needs no declarations but runs has a one-line `<!-- example <id> -->`.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface Block {
  /** README path from the repository root, e.g. lib/README.md. */
  readme: string;
  /** 1-based line of the block's first code line. */
  line: number;
  lang: string;
  code: string;
  /** The preamble's id, if it has one. */
  id: string | undefined;
  preamble: string;
  /** 1-based README line of the preamble's first line (0: the preamble comes from the test). */
  preambleLine: number;
}

export const where = (block: Pick<Block, 'readme' | 'line'>): string => `${block.readme}:${block.line}`;

const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', 'test-results', 'playwright-report', 'tmp', '.keys']);

/** Every README.md in the repository (outside dependencies and build output), sorted. */
export function findReadmes(dir = ROOT): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) found.push(...findReadmes(join(dir, entry.name)));
    } else if (entry.name === 'README.md') {
      found.push(relative(ROOT, join(dir, entry.name)));
    }
  }
  return found.sort();
}

const FENCE_OPEN = /^```([\w-]*)\s*$/;
const FENCE_CLOSE = /^```\s*$/;
const PREAMBLE_OPEN = /^<!-- example ([\w-]+)/;

/** The fenced blocks of one README, each with the preamble comment right above it (blank lines between allowed). */
export function readBlocks(readme: string): Block[] {
  const lines = readFileSync(join(ROOT, readme), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE_OPEN.exec(lines[i]!);
    if (open === null) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !FENCE_CLOSE.test(lines[end]!)) end++;
    if (end === lines.length) throw new Error(`${readme}:${i + 1}: a code block that is never closed`);
    const block: Block = {
      readme,
      line: start + 1,
      lang: open[1]!,
      code: lines.slice(start, end).join('\n'),
      id: undefined,
      preamble: '',
      preambleLine: 0,
    };
    let above = i - 1;
    while (above >= 0 && lines[above]!.trim() === '') above--;
    const oneLine = above >= 0 && lines[above]!.trimEnd().endsWith('-->') ? PREAMBLE_OPEN.exec(lines[above]!) : null;
    if (oneLine !== null) {
      block.id = oneLine[1]!;
    } else if (above >= 0 && lines[above]!.trim() === '-->') {
      let first = above - 1;
      while (first >= 0 && !lines[first]!.startsWith('<!--')) first--;
      const header = first >= 0 ? PREAMBLE_OPEN.exec(lines[first]!) : null;
      if (header === null)
        throw new Error(`${readme}:${first + 1}: a comment above a block that is not "<!-- example <id>"`);
      block.id = header[1]!;
      block.preamble = lines.slice(first + 1, above).join('\n');
      block.preambleLine = first + 2;
    }
    blocks.push(block);
    i = end;
  }
  return blocks;
}

export const isScript = (block: Block): boolean => ['ts', 'typescript', 'js', 'javascript'].includes(block.lang);

// ---------------------------------------------------------------------------------------------
// Type check

/** The module a block is checked as: at the repository root, so './server/…' imports mean what the READMEs say. */
const virtualName = (block: Block): string =>
  join(ROOT, `readme-example--${block.readme.replace(/[/.]/g, '-')}--${block.line}.ts`);

const preambleLines = (block: Block): number => (block.preamble === '' ? 0 : block.preamble.split('\n').length);

const moduleText = (block: Block): string =>
  `${block.preamble === '' ? '' : `${block.preamble}\n`}${block.code}\nexport {};\n`;

/** One error, at the README line it is on. */
export interface BlockDiagnostic {
  at: string;
  message: string;
}

/**
 * Type-checks every block in one program with the root tsconfig.json (the library's sources through
 * its `paths`, DOM and Node types). A JavaScript block is checked as TypeScript. Answers the errors
 * of each block (in the order given), each at its README line (a preamble's at the preamble's line).
 */
export function typeCheck(blocks: readonly Block[]): BlockDiagnostic[][] {
  const configPath = join(ROOT, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p));
  if (config.error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT, undefined, configPath);
  // The SDK as its sources too (tsconfig.json maps only postguard-ts's entries).
  const paths = { ...parsed.options.paths, '@postguard-ts/sdk': ['./sdk/index.ts'] };
  const options: ts.CompilerOptions = { ...parsed.options, paths, noEmit: true };
  const files = new Map(blocks.map((b) => [virtualName(b), b]));
  if (files.size !== blocks.length) throw new Error('two blocks at one README line');
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (name) => files.has(name) || fileExists.call(host, name);
  host.readFile = (name) => (files.has(name) ? moduleText(files.get(name)!) : readFile.call(host, name));
  host.getSourceFile = (name, language, ...rest) => {
    const block = files.get(name);
    if (block !== undefined) return ts.createSourceFile(name, moduleText(block), language, true, ts.ScriptKind.TS);
    return getSourceFile.call(host, name, language, ...rest);
  };
  const program = ts.createProgram({ rootNames: [...files.keys()], options, host });
  return blocks.map((block) => {
    const source = program.getSourceFile(virtualName(block))!;
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    return diagnostics.map((d) => {
      const line = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
      const inPreamble = line < preambleLines(block);
      let at = `${block.readme}:${block.line + line - preambleLines(block)}`;
      if (inPreamble)
        at =
          block.preambleLine === 0
            ? `${block.readme}:${block.line} (its preamble in test/readme-examples.test.ts)`
            : `${block.readme}:${block.preambleLine + line} (preamble)`;
      return {
        at,
        message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
      };
    });
  });
}

/**
 * typeCheck on a thread of its own (TypeScript takes several seconds to parse the DOM, Node and
 * server types), so the rest of the test runs meanwhile.
 */
export function typeCheckOnThread(blocks: readonly Block[]): Promise<BlockDiagnostic[][]> {
  return new Promise((resolve, reject) => {
    // The thread is plain JavaScript that registers tsx (TSX_TSCONFIG_PATH: the source paths), then loads ours.
    const entry = new URL('./readme-typecheck-thread.ts', import.meta.url).href;
    const source = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(entry)}); })`;
    const thread = new Worker(source, { eval: true, workerData: blocks });
    thread.once('message', (result: BlockDiagnostic[][]) => resolve(result));
    thread.once('error', reject);
    thread.once('exit', (code) => reject(new Error(`the type-check thread exited with ${code}`)));
  });
}

// ---------------------------------------------------------------------------------------------
// Running

/** What a block's top level defined, and what it exported (`export default` → `default`). */
export interface BlockResult {
  vars: Record<string, unknown>;
  exports: Record<string, unknown>;
}

export interface Runnable {
  /** Module specifiers the block imports, in order (the caller loads them). */
  imports: string[];
  /** The names its preamble declares: the caller's fixture gives each a value. */
  declared: string[];
  run(modules: ReadonlyMap<string, unknown>, values: Readonly<Record<string, unknown>>): Promise<BlockResult>;
}

function bindingNames(name: ts.BindingName, into: string[]): void {
  if (ts.isIdentifier(name)) into.push(name.text);
  else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bindingNames(element.name, into);
}

const isDeclare = (node: ts.Node): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DeclareKeyword);

/**
 * The block as an async function: its imports become lookups in `modules` (TypeScript's CommonJS
 * emit, with a `require` of ours), its preamble's declarations the fixture's values, and it returns
 * its top-level variables. Lines are not mapped: a failure names the block instead.
 */
export function runnable(block: Block): Runnable {
  const source = ts.createSourceFile('block.ts', moduleText(block), ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const imports: string[] = [];
  const named: Array<[string, string]> = [];
  const declared: string[] = [];
  const vars: string[] = [];
  const preambleEnd = block.preamble === '' ? 0 : block.preamble.length + 1;
  for (const statement of source.statements) {
    const inPreamble = statement.getStart() < preambleEnd;
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
      if (inPreamble && statement.importClause?.isTypeOnly !== true)
        throw new Error(`${where(block)}: a preamble imports types only (import type …)`);
      if (statement.importClause?.isTypeOnly !== true) {
        const specifier = statement.moduleSpecifier.text;
        imports.push(specifier);
        const bindings = statement.importClause?.namedBindings;
        if (bindings !== undefined && ts.isNamedImports(bindings))
          for (const e of bindings.elements)
            if (!e.isTypeOnly) named.push([specifier, (e.propertyName ?? e.name).text]);
      }
    } else if (inPreamble) {
      if (ts.isVariableStatement(statement) && isDeclare(statement)) {
        for (const d of statement.declarationList.declarations) bindingNames(d.name, declared);
      } else if (ts.isFunctionDeclaration(statement) && isDeclare(statement) && statement.name !== undefined) {
        declared.push(statement.name.text);
      } else {
        throw new Error(`${where(block)}: a preamble holds type imports and declare statements only`);
      }
    } else if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) bindingNames(d.name, vars);
    } else if (ts.isFunctionDeclaration(statement) && statement.name !== undefined) {
      vars.push(statement.name.text);
    }
  }
  const { outputText } = ts.transpileModule(moduleText(block), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: false },
  });
  const body =
    `const { ${declared.join(', ')} } = __values;\n${outputText}\n` +
    `return { vars: { ${vars.join(', ')} }, exports };`;
  const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (
    ...args: string[]
  ) => (...args: unknown[]) => Promise<BlockResult>;
  const fn = new AsyncFunction('require', 'exports', '__values', body);
  return {
    imports: [...new Set(imports)],
    declared,
    run: (modules, values) => {
      for (const name of declared)
        if (!Object.hasOwn(values, name)) throw new Error(`${where(block)}: the fixture gives no value for ${name}`);
      // TypeScript drops an import nothing uses as a value; what the block names must exist all the same.
      for (const [specifier, name] of named)
        if (!Object.hasOwn(Object(modules.get(specifier)), name))
          throw new Error(`${where(block)}: ${specifier} exports no ${name} when it runs`);
      const require = (specifier: string): unknown => {
        if (!modules.has(specifier)) throw new Error(`${where(block)}: ${specifier} was not loaded`);
        return modules.get(specifier);
      };
      return fn(require, {}, values);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Shell

/** A shell command: its words, and the README line it starts on. */
export interface ShellCommand {
  line: number;
  words: string[];
}

/**
 * The commands of a shell block: `\` continuations joined, `#` comments dropped, split at `&&`,
 * `||`, `;` and `|`, words unquoted ('…' and "…"), leading VAR=value assignments dropped.
 */
export function shellCommands(block: Block): ShellCommand[] {
  const commands: ShellCommand[] = [];
  const lines = block.code.split('\n');
  let words: string[] = [];
  let word: string | undefined;
  let startLine = block.line;
  const endWord = () => {
    if (word !== undefined) words.push(word);
    word = undefined;
  };
  const endCommand = () => {
    endWord();
    while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) words.shift();
    if (words.length > 0) commands.push({ line: startLine, words });
    words = [];
  };
  for (let n = 0; n < lines.length; n++) {
    const text = lines[n]!;
    if (words.length === 0 && word === undefined) startLine = block.line + n;
    let quote: string | undefined;
    let continued = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i]!;
      if (quote !== undefined) {
        if (c === quote) quote = undefined;
        else word = (word ?? '') + c;
      } else if (c === "'" || c === '"') {
        quote = c;
        word ??= '';
      } else if (c === '\\' && i === text.length - 1) {
        continued = true;
      } else if (c === '#' && word === undefined) {
        break;
      } else if (c === ' ' || c === '\t') {
        endWord();
      } else if (c === ';' || c === '|' || c === '&') {
        if (c !== ';' && text[i + 1] === c) i++;
        else if (c === '&') throw new Error(`${block.readme}:${block.line + n}: a background job (&) in an example`);
        endCommand();
        startLine = block.line + n;
      } else {
        word = (word ?? '') + c;
      }
    }
    if (quote !== undefined) throw new Error(`${block.readme}:${block.line + n}: an unclosed ${quote}`);
    if (!continued) endCommand();
    else endWord();
  }
  return commands;
}

export const exists = (path: string): boolean => existsSync(join(ROOT, path));

export function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(join(ROOT, path), 'utf8')) as T;
}

// ---------------------------------------------------------------------------------------------
// Shell commands against what exists

/** What a shell command may name: the bins' help texts (from their own parsers), scripts, projects. */
export interface ShellWorld {
  /** bin → subcommand path → its help text, or undefined when the parser does not know the path. */
  help(bin: string, path: readonly string[]): Promise<string | undefined>;
  /** How many leading positionals of a bin are its subcommand (pg-pkg api-key create: 2). */
  subcommandDepth(bin: string, args: readonly string[]): number;
  /** The bins the published packages declare. */
  bins: ReadonlySet<string>;
  /** npm scripts: workspace name (or '' for the root) → script names. */
  scripts: ReadonlyMap<string, ReadonlySet<string>>;
  playwrightProjects: readonly string[];
}

const positionals = (args: readonly string[], valueOptions: ReadonlySet<string>): string[] => {
  const found: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('-')) {
      if (valueOptions.has(a)) i++;
    } else {
      found.push(a);
    }
  }
  return found;
};

const flagsOf = (args: readonly string[]): string[] =>
  args.filter((a) => a.startsWith('-') && a !== '-' && a !== '--').map((a) => a.split('=')[0]!);

async function checkBin(world: ShellWorld, bin: string, args: readonly string[]): Promise<string[]> {
  if (!world.bins.has(bin)) return [`${bin} is not a bin of any published package`];
  const depth = world.subcommandDepth(bin, args);
  const path = args.slice(0, depth);
  const help = await world.help(bin, path);
  if (help === undefined) return [`${[bin, ...path].join(' ')}: no such command`];
  const words = new Set(help.split(/[\s,()[\]|=]+/));
  return flagsOf(args.slice(depth))
    .filter((flag) => !words.has(flag))
    .map((flag) => `${[bin, ...path].join(' ')}: ${flag} is not an option (its --help does not list it)`);
}

const PLAYWRIGHT_VALUE_OPTIONS = new Set(['-g', '--grep', '--project', '--workers', '-c', '--config', '--reporter']);
const VITEST_VALUE_OPTIONS = new Set(['-t', '--testNamePattern', '--project', '--reporter']);

/**
 * What is wrong with one command of a shell block ([] when nothing): an npm script, bin, subcommand
 * or option that does not exist, a file a command runs that is not there, a Playwright project
 * that is not configured.
 */
export async function checkShell(world: ShellWorld, command: ShellCommand): Promise<string[]> {
  const [program, ...args] = command.words;
  if (program === undefined) return [];
  if (world.bins.has(program) || /^pg-/.test(program)) return checkBin(world, program, args);
  switch (program) {
    case 'cd':
    case 'cp':
    case 'mkdir':
      return [];
    case 'docker': {
      // Our images run our bins: `docker compose run --rm migrate pg-pkg api-key create …`.
      const at = args.findIndex((a) => world.bins.has(a));
      return at < 0 ? [] : checkBin(world, args[at]!, args.slice(at + 1));
    }
    case 'node': {
      const file = positionals(args, new Set(['--import', '--require', '-r']))[0];
      return file === undefined || exists(file) ? [] : [`node runs ${file}, which does not exist`];
    }
    case 'npm': {
      const [verb, ...rest] = args;
      if (verb === 'ci' || verb === 'install' || verb === 'i' || verb === 'init') return [];
      const workspaceAt = rest.findIndex((a) => a === '-w' || a === '--workspace');
      const workspace = workspaceAt < 0 ? '' : rest[workspaceAt + 1]!;
      const scripts = world.scripts.get(workspace);
      if (scripts === undefined) return [`npm: no workspace ${workspace}`];
      const isWorkspace = (i: number) => workspaceAt >= 0 && i === workspaceAt + 1;
      const name =
        verb === 'run' || verb === 'run-script' ? rest.find((a, i) => !isWorkspace(i) && !a.startsWith('-')) : verb;
      if (name === undefined) return [`npm ${verb}: which script?`];
      if (!scripts.has(name))
        return [
          `npm ${verb === 'run' ? 'run ' : ''}${name}: no such script in ${workspace || 'the root'} package.json`,
        ];
      // `npm run pg-pkg -- api-key create …` runs the bin of that name from the sources.
      const dashes = rest.indexOf('--');
      return world.bins.has(name) && dashes >= 0 ? checkBin(world, name, rest.slice(dashes + 1)) : [];
    }
    case 'npx': {
      if (args[0] === '-p' || args[0] === '--package') return [];
      const [tool, ...rest] = args;
      if (tool === undefined) return ['npx: which tool?'];
      // A bin of ours installed from the tarballs (README.md's route before the packages are published).
      if (world.bins.has(tool)) return checkBin(world, tool, rest);
      if (!exists(`node_modules/.bin/${tool}`)) return [`npx ${tool}: no such tool in node_modules/.bin`];
      const problems: string[] = [];
      if (tool === 'tsx') {
        const file = positionals(rest, new Set())[0];
        if (file !== undefined && !exists(file)) problems.push(`npx tsx runs ${file}, which does not exist`);
      } else if (tool === 'playwright' && rest[0] === 'test') {
        for (const path of positionals(rest.slice(1), PLAYWRIGHT_VALUE_OPTIONS))
          if (!exists(path.replace(/:\d+$/, ''))) problems.push(`npx playwright test ${path}: no such file or folder`);
        for (let i = 0; i < rest.length; i++) {
          const [flag, inline] = rest[i]!.split('=');
          if (flag !== '--project') continue;
          const name = inline ?? rest[i + 1]!;
          const pattern = new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*')}$`);
          if (!world.playwrightProjects.some((p) => pattern.test(p)))
            problems.push(`npx playwright test --project=${name}: no such project in playwright.config.ts`);
        }
      } else if (tool === 'vitest' && rest[0] === 'run') {
        for (const path of positionals(rest.slice(1), VITEST_VALUE_OPTIONS))
          if (!exists(path)) problems.push(`npx vitest run ${path}: no such file or folder`);
      }
      return problems;
    }
    default:
      return [`${program}: not a command the READMEs use (npm, npx, node, docker, cd, cp, mkdir or one of our bins)`];
  }
}

// `npm run check:docs`: how much of the published API carries a doc comment. One TypeScript program
// over every public entry (scripts/public-entries.ts), each entry's exports followed through
// re-exports by the type checker, every declaration counted once however many entries export it.
// Each entry needs a module comment naming it (`@module postguard-ts/worker`: TypeDoc's title for
// it); classes, functions and the public members of classes must all be documented. Interfaces
// (with their members), type aliases, consts and enums are counted and listed, and must be too
// under `--strict`. A member that is private, protected or `@internal` is not public.
import { relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from './packages.js';
import { publicEntries } from './public-entries.js';

type Kind =
  'entry' | 'class' | 'class member' | 'function' | 'interface' | 'interface member' | 'type alias' | 'const' | 'enum';
const KINDS: readonly Kind[] = [
  'entry',
  'class',
  'class member',
  'function',
  'interface',
  'interface member',
  'type alias',
  'const',
  'enum',
];
const strict = process.argv.includes('--strict');
const REQUIRED: ReadonlySet<Kind> = new Set(strict ? KINDS : ['entry', 'class', 'class member', 'function']);

const started = performance.now();
const entries = publicEntries();
const config = ts.getParsedCommandLineOfConfigFile(
  `${ROOT}/tsconfig.json`,
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  },
)!;
// The root tsconfig (its `paths` reach the library's sources), without the default libraries and
// ambient types: members declared there (Error's, the DOM's) are not ours to document, and parsing
// them took three quarters of the time. An interface built on a library's generic type (`Omit<…>`)
// would then lose members silently, so heritage() refuses one.
const program = ts.createProgram({
  rootNames: entries.map((entry) => entry.source),
  options: { ...config.options, noLib: true, types: [] },
});
const checker = program.getTypeChecker();

const ours = (node: ts.Node) => !node.getSourceFile().fileName.includes('/node_modules/');
const where = (node: ts.Node) => {
  const file = node.getSourceFile();
  return `${relative(ROOT, file.fileName)}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
};
/**
 * A doc comment of its own with some text. A comment with a blank line after it is about the file
 * (the compiler hands it to the first declaration all the same), and so is a module comment.
 */
const hasOwnDoc = (node: ts.Node) =>
  ts.getJSDocCommentsAndTags(node).some((doc) => {
    if (!ts.isJSDoc(doc) || (ts.getTextOfJSDocComment(doc.comment) ?? '').trim() === '') return false;
    if ((doc.tags ?? []).some((tag) => ['module', 'packageDocumentation'].includes(tag.tagName.text))) return false;
    const gap = doc.getSourceFile().text.slice(doc.end, doc.parent.getStart());
    return !/\n[ \t]*\n/.test(gap);
  });
const isInternal = (node: ts.Node) => ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal');

interface Item {
  kind: Kind;
  name: string;
  at: string;
  documented: boolean;
}
const items: Item[] = [];
const seen = new Set<ts.Node>();

function count(kind: Kind, name: string, declarations: readonly ts.Node[], inherited = false): void {
  const first = declarations[0]!;
  if (seen.has(first)) return;
  seen.add(first);
  items.push({ kind, name, at: where(first), documented: inherited || declarations.some(hasOwnDoc) });
}

function heritage(declaration: ts.ClassDeclaration | ts.InterfaceDeclaration): void {
  for (const type of (declaration.heritageClauses ?? []).flatMap((clause) => clause.types)) {
    if (type.typeArguments !== undefined && checker.getSymbolAtLocation(type.expression) === undefined)
      throw new Error(
        `${where(type)}: ${type.getText()} comes from a default library, which this check leaves out; count its members another way`,
      );
  }
}

/** Public members of a class or interface type declared in this repository. */
function members(owner: string, kind: Kind, properties: readonly ts.Symbol[]): void {
  for (const property of properties) {
    const declarations = (property.declarations ?? []).filter(ours);
    if (declarations.length === 0 || property.name === 'prototype') continue;
    const hidden = declarations.some(
      (d) =>
        isInternal(d) ||
        (ts.getCombinedModifierFlags(d as ts.Declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !==
          0 ||
        ((ts.isPropertyDeclaration(d) || ts.isMethodDeclaration(d)) && ts.isPrivateIdentifier(d.name)),
    );
    if (hidden) continue;
    // A member that implements or overrides a documented one shows that documentation (editors, TypeDoc).
    const inherited = property.getDocumentationComment(checker).some((part) => part.text.trim() !== '');
    count(kind, `${owner}.${property.name}`, declarations, inherited);
  }
}

const isFunctionValue = (d: ts.Declaration) =>
  ts.isVariableDeclaration(d) &&
  d.initializer !== undefined &&
  (ts.isArrowFunction(d.initializer) || ts.isFunctionExpression(d.initializer));

/** One exported symbol: each of its meanings (a const and a type of the same name) counts. */
function visit(symbol: ts.Symbol): void {
  const declarations = (symbol.declarations ?? []).filter(ours);
  if (declarations.length === 0 || declarations.some(isInternal)) return;
  const name = symbol.name;
  const of = (test: (d: ts.Declaration) => boolean) => declarations.filter(test);
  const classes = of(ts.isClassDeclaration) as ts.ClassDeclaration[];
  if (classes.length > 0) {
    classes.forEach(heritage);
    count('class', name, classes);
    members(name, 'class member', checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)));
    // Statics: the properties of the constructor itself.
    members(name, 'class member', checker.getPropertiesOfType(checker.getTypeOfSymbolAtLocation(symbol, classes[0]!)));
  }
  const functions = of((d) => ts.isFunctionDeclaration(d) || isFunctionValue(d));
  if (functions.length > 0) count('function', name, functions);
  // A variable's doc comment sits on its statement; getJSDocCommentsAndTags finds it from the declaration.
  const consts = of((d) => ts.isVariableDeclaration(d) && !isFunctionValue(d));
  if (consts.length > 0) count('const', name, consts);
  const enums = of(ts.isEnumDeclaration);
  if (enums.length > 0) count('enum', name, enums);
  const interfaces = of(ts.isInterfaceDeclaration) as ts.InterfaceDeclaration[];
  if (interfaces.length > 0) {
    interfaces.forEach(heritage);
    count('interface', name, interfaces);
    members(name, 'interface member', checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)));
  }
  const aliases = of(ts.isTypeAliasDeclaration) as ts.TypeAliasDeclaration[];
  if (aliases.length > 0) {
    count('type alias', name, aliases);
    if (aliases.some((d) => ts.isTypeLiteralNode(d.type)))
      members(name, 'interface member', checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)));
  }
}

/**
 * Whether the file opens with a doc comment that says what the entry is and names it with
 * `@module <specifier>`: TypeDoc reads a module comment only there, before the first import.
 */
function hasModuleComment(source: ts.SourceFile, specifier: string): boolean {
  return (ts.getLeadingCommentRanges(source.text, 0) ?? []).some(({ pos, end }) => {
    const text = source.text.slice(pos, end);
    if (!text.startsWith('/**')) return false;
    const lines = text
      .slice(3, -2)
      .split('\n')
      .map((line) => line.replace(/^\s*\*?\s?/, '').trim());
    const names = lines
      .filter((line) => line.startsWith('@module '))
      .map((line) => line.slice('@module '.length).trim());
    return names.includes(specifier) && lines.some((line) => line !== '' && !line.startsWith('@'));
  });
}

for (const { specifier, source: file } of entries) {
  const source = program.getSourceFile(file);
  const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
  if (source === undefined || module === undefined) throw new Error(`${specifier}: ${file} is not a module`);
  items.push({
    kind: 'entry',
    name: `${specifier} (a module comment with @module ${specifier})`,
    at: relative(ROOT, file),
    documented: hasModuleComment(source, specifier),
  });
  for (const exported of checker.getExportsOfModule(module)) {
    visit(exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported);
  }
}

console.log(`Doc comments on the public API (${entries.map((entry) => entry.specifier).join(', ')}):`);
const failing: Item[] = [];
for (const kind of KINDS) {
  const all = items.filter((item) => item.kind === kind);
  if (all.length === 0) continue;
  const missing = all.filter((item) => !item.documented);
  const percent = ((100 * (all.length - missing.length)) / all.length).toFixed(1);
  const documented = `${all.length - missing.length}`.padStart(4);
  const required = REQUIRED.has(kind);
  console.log(
    `  ${kind.padEnd(17)} ${documented} / ${`${all.length}`.padEnd(4)} ${percent.padStart(5)} %${required ? '' : '  (reported)'}`,
  );
  if (required) failing.push(...missing);
  for (const item of missing) console.log(`      undocumented: ${item.name} (${item.at})`);
}
console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
if (failing.length > 0) {
  console.error(
    `\n${failing.length} public declaration(s) without a doc comment: say in /** … */ what each is and when to use it.`,
  );
  process.exit(1);
}
console.log('check:docs: every entry, class, function and public class member has a doc comment');

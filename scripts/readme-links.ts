import { existsSync } from 'node:fs';
import { join, posix } from 'node:path';
import { ROOT, packageJson } from './packages.js';

/** The repository's web address, from lib/package.json `repository` (`git+https://…/x.git` → `https://…/x`). */
export function repositoryUrl(): string {
  const repository = packageJson('lib')['repository'] as { url: string };
  return repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
}

/** The targets of a Markdown text's links and images, inline and by reference, outside code. */
export function markdownLinks(markdown: string): Array<{ target: string; line: number }> {
  const links: Array<{ target: string; line: number }> = [];
  let fenced = false;
  markdown.split('\n').forEach((text, index) => {
    if (/^\s*(?:```|~~~)/.test(text)) fenced = !fenced;
    if (fenced) return;
    const prose = text.replace(/`[^`]*`/g, '');
    for (const match of prose.matchAll(/\]\(([^()\s]+)(?:\s+"[^"]*")?\)/g))
      links.push({ target: match[1]!, line: index + 1 });
    const reference = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(prose);
    if (reference !== null) links.push({ target: reference[1]!, line: index + 1 });
  });
  return links;
}

/**
 * What is wrong with the links of a Markdown file shipped at `shipped` in a tarball that holds
 * `files`: a relative link must reach a file of the tarball (from where the file sits in it, as a
 * reader of the installed package follows it), and a link into this repository
 * (`<repository>/blob/<branch>/<path>`, for what does not ship) must name a file that exists here.
 */
export function linkProblems(markdown: string, shipped: string, files: readonly string[]): string[] {
  const problems: string[] = [];
  const repository = repositoryUrl();
  for (const { target, line } of markdownLinks(markdown)) {
    const at = `${shipped}:${line}`;
    const path = target.split(/[#?]/, 1)[0]!;
    if (target.startsWith('#') || /^mailto:/i.test(target)) continue;
    if (target.startsWith(`${repository}/`)) {
      const inRepository = /^\/(?:blob|tree)\/[^/]+\/(.+)$/.exec(path.slice(repository.length));
      if (inRepository === null || !existsSync(join(ROOT, decodeURIComponent(inRepository[1]!))))
        problems.push(`${at}: ${target} names no file of this repository`);
      continue;
    }
    if (/^[a-z][\w+.-]*:/i.test(target)) continue; // another site
    const resolved = posix.normalize(posix.join(posix.dirname(shipped), decodeURIComponent(path)));
    const inTarball = files.includes(resolved) || files.some((file) => file.startsWith(`${resolved}/`));
    if (resolved.startsWith('../') || !inTarball)
      problems.push(
        `${at}: ${target} is not in the tarball (link what does not ship as ${repository}/blob/main/<path>)`,
      );
  }
  return problems;
}

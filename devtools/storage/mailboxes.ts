/**
 * The `recipient` field of an upload init: one or more mailboxes separated by commas, each a bare
 * address or `Display Name <address>`, as Cryptify's mailbox-list parser accepts them. Anything
 * else makes init answer 400.
 */

const ATOM = "[\\w!#$%&'*+/=?^`{|}~-]+";
const LOCAL = `(?:${ATOM}(?:\\.${ATOM})*|"(?:[^"\\\\\\r\\n]|\\\\.)*")`;
const LABEL = '[a-z0-9\\u0080-\\uFFFF](?:[a-z0-9\\u0080-\\uFFFF-]*[a-z0-9\\u0080-\\uFFFF])?';
const DOMAIN = `(?:${LABEL}(?:\\.${LABEL})*|\\[[^[\\]\\\\\\s]*\\])`;
const ADDRESS = new RegExp(`^${LOCAL}@${DOMAIN}$`, 'i');
// The unquoted display name takes its trailing whitespace itself; only a quoted one is followed
// by \s* (an \s* after both would let the two share a run of spaces: quadratic backtracking).
const NAMED = /^(?:"(?:[^"\\]|\\.)*"\s*|[^<>",]*)<([^<>]*)>$/;

export class MailboxError extends Error {
  override readonly name = 'MailboxError';
}

/** The addresses of a mailbox list, in order; throws MailboxError naming the first bad entry. */
export function parseMailboxes(list: string): string[] {
  const entries = splitOutsideQuotes(list).map((e) => e.trim());
  if (entries.length === 0 || entries.every((e) => e === '')) throw new MailboxError('missing mailbox');
  return entries.map((entry) => {
    const named = NAMED.exec(entry);
    const address = (named ? named[1]! : entry).trim();
    if (!ADDRESS.test(address)) throw new MailboxError(`invalid mailbox ${JSON.stringify(entry)}`);
    return address;
  });
}

/** The entries between commas outside quoted strings (a backslash in quotes escapes the next character). */
function splitOutsideQuotes(list: string): string[] {
  const out: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === '\\' && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (c === ',' && !quoted) {
      out.push(list.slice(start, i));
      start = i + 1;
    }
  }
  out.push(list.slice(start));
  return out;
}

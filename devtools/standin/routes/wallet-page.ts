import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { attributeName } from 'postguard-ts';
import { YiviError } from '../errors.js';
import type { NormalizedAttributeRequest } from '../request.js';
import { SERVER_VERSION } from '../sessions.js';
import type { Session, SessionStore } from '../sessions.js';
import type { SimulatedAttribute } from '../protocol.js';
import { SIMULATED_DISCLOSURE_CONTEXT } from '../protocol.js';
import { randomToken } from '../tokens.js';
import { tokenParamsSchema } from './schemas.js';

/**
 * /standin/wallet: a server-rendered page that plays the phone on a laptop. It lists pending
 * sessions with what they ask for; a person picks an option per disjunction, types the values and
 * presses Disclose (or Cancel). The page then walks the same state machine a wallet does: connect
 * (with its own client Authorization), then submit a simulated disclosure.
 *
 * Each session says what it is for as far as its request can tell. A PostGuard key server asks for
 * the same disclosure whether the person decrypts a file (a user secret key) or signs as its
 * sender (signing keys): its session request carries only the attributes and a validity, and the
 * JWT it yields is spent on one route or the other only after the disclosure. So the page names the
 * purpose as "a PostGuard key: to decrypt a file, or to sign as its sender" and lists, in words,
 * what the session discloses.
 */

export interface WalletPageOptions {
  store: SessionStore;
}

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const isCredentialId = (id: string): boolean => id.split('.').length === 3;

function renderAttribute(ar: NormalizedAttributeRequest, name: string): string {
  const id = escapeHtml(ar.type);
  if (isCredentialId(ar.type)) {
    return `<li><code>${id}</code> <small>(whole credential: discloses "present")</small></li>`;
  }
  const demands = [ar.value !== undefined ? 'exact value required' : '', ar.notNull ? 'must not be empty' : '']
    .filter((d) => d !== '')
    .join(', ');
  return (
    `<li><label><code>${id}</code>${demands === '' ? '' : ` <small>(${demands})</small>`}<br>` +
    `<input type="text" name="${name}" value="${escapeHtml(ar.value ?? '')}" autocomplete="off"></label></li>`
  );
}

/** What a session asks for, in words: each disjunction's options, attributes by their readable names. */
function disclosesText(session: Session): string {
  const named = (ar: NormalizedAttributeRequest) =>
    `<strong>${escapeHtml(attributeName(ar.type))}</strong>${ar.value === undefined ? '' : ` ${escapeHtml(ar.value)}`}`;
  const parts = session.request.disclose.map((discon) =>
    discon.map((con) => (con.length === 0 ? 'nothing (optional)' : con.map(named).join(' and '))).join(' or '),
  );
  return parts.length === 0 ? 'nothing' : parts.join('; ');
}

function renderSession(session: Session, formKey: string): string {
  const ct = escapeHtml(session.clientToken);
  const disjunctions = session.request.disclose
    .map((discon, i) => {
      const preferred = Math.max(
        0,
        discon.findIndex((con) => con.length > 0),
      );
      const options = discon
        .map((con, j) => {
          const checked = j === preferred ? ' checked' : '';
          const body =
            con.length === 0
              ? '<em>skip (optional)</em>'
              : `<ul>${con.map((ar, k) => renderAttribute(ar, `v.${i}.${j}.${k}`)).join('')}</ul>`;
          const radio = `<input type="radio" name="c.${i}" value="${j}"${checked}>`;
          return `<div class="option"><label>${radio} option ${j + 1}</label>${body}</div>`;
        })
        .join('');
      return `<fieldset><legend>Disjunction ${i + 1}</legend>${options}</fieldset>`;
    })
    .join('');
  return (
    `<section><h2>Session <code>${ct.slice(0, 6)}…</code> <small class="status">${escapeHtml(session.status)}</small></h2>` +
    `<p class="purpose">For a PostGuard key: to decrypt a file, or to sign as its sender. ` +
    `<small>(The key server asks for the same disclosure either way, so the request cannot say which.)</small></p>` +
    `<p class="discloses">Discloses: ${disclosesText(session)}</p>` +
    `<form method="post" action="wallet/${ct}/disclose">` +
    `<input type="hidden" name="key" value="${formKey}">${disjunctions}` +
    `<button type="submit">Disclose</button></form>` +
    `<form method="post" action="wallet/${ct}/cancel"><input type="hidden" name="key" value="${formKey}">` +
    `<button type="submit" class="cancel">Cancel</button></form></section>`
  );
}

export function renderWalletPage(sessions: readonly Session[], formKey: string, notice: string): string {
  const list =
    sessions.length === 0
      ? '<p>No pending sessions. Start one (e.g. ask the demo for a key): it appears here within two seconds.</p>'
      : sessions.map((s) => renderSession(s, formKey)).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${
  // With nothing to answer, the page looks again by itself (no script: the stand-in has no CSP to
  // relax); once a session is listed it stays still, so a half-filled form is not lost.
  sessions.length === 0 ? '<meta http-equiv="refresh" content="2">' : ''
}
<title>Stand-in wallet</title>
<link rel="icon" href="data:,">
<style>
:root{color-scheme:light dark;--accent:#1d5fbf;--muted:#667;--line:#c8ccd4}
body{font:16px/1.45 system-ui,sans-serif;margin:0 auto;max-width:38rem;padding:1rem}
h1{font-size:1.4rem;margin:.5rem 0}h2{font-size:1.05rem;margin:0 0 .5rem}
.lead{color:var(--muted)}
section{border:1px solid var(--line);border-radius:.6rem;padding:.9rem;margin:1rem 0;box-shadow:0 1px 3px #0001}
.status{font-weight:normal;color:var(--muted)}
.purpose{margin:.25rem 0;padding:.4rem .6rem;border-left:4px solid var(--accent);background:#1d5fbf14}
.purpose small{color:var(--muted)}.discloses{margin:.5rem 0}
fieldset{border:1px solid var(--line);border-radius:.4rem;margin:.5rem 0}ul{padding-left:1.2rem;margin:.25rem 0}li{margin:.25rem 0}
input[type=text]{width:100%;box-sizing:border-box;font:inherit;padding:.4rem;border:1px solid var(--line);border-radius:.3rem}
button{font:inherit;padding:.5rem 1rem;margin:.5rem .5rem 0 0;border-radius:.4rem;border:1px solid var(--line);cursor:pointer}
button[type=submit]:not(.cancel){background:var(--accent);border-color:var(--accent);color:#fff}
.cancel{background:#fee;color:#700}
.notice{background:#eef;color:#113;padding:.5rem;border-radius:.25rem}code{word-break:break-all}
</style></head><body>
<h1>Stand-in wallet</h1>
<p class="lead">Simulated Yivi app for development. Leave a field empty to disclose no value (null).
<a href="wallet">Refresh</a></p>
${notice === '' ? '' : `<p class="notice" role="status">${escapeHtml(notice)}</p>`}
${list}
</body></html>`;
}

/** The page's choice for each disjunction, from the submitted form. */
export function setsFromForm(session: Session, form: URLSearchParams): SimulatedAttribute[][] {
  return session.request.disclose.map((discon, i) => {
    const choice = Number(form.get(`c.${i}`));
    if (!Number.isInteger(choice) || choice < 0 || choice >= discon.length) {
      throw new YiviError('MALFORMED_INPUT', `no option chosen for disjunction ${i + 1}`);
    }
    return discon[choice]!.map((ar, k) => {
      const value = form.get(`v.${i}.${choice}.${k}`) ?? '';
      return { id: ar.type, rawvalue: value === '' ? null : value };
    });
  });
}

export async function walletPageRoutes(app: FastifyInstance, opts: WalletPageOptions): Promise<void> {
  const { store } = opts;
  // Forms carry a per-process key, so another site cannot make a visitor's browser disclose or cancel.
  const formKey = randomBytes(16).toString('hex');
  // The Authorization the page used when it connected to a session as its wallet.
  const pageAuth = new Map<string, string>();

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, new URLSearchParams(body.toString()));
  });

  const keyMatches = (form: unknown): boolean => {
    const presented = form instanceof URLSearchParams ? (form.get('key') ?? '') : '';
    return presented.length === formKey.length && timingSafeEqual(Buffer.from(presented), Buffer.from(formKey));
  };

  // Relative, so the page also works behind a proxy that mounts the stand-in under a path.
  const refuseForm = (reply: FastifyReply) =>
    reply.code(403).type('text/plain').send('stale or foreign form; reload the page');

  const backTo = (notice: string) => `../../wallet?notice=${encodeURIComponent(notice)}`;

  app.get<{ Querystring: { notice?: string } }>(
    '/wallet',
    { schema: { querystring: { type: 'object', properties: { notice: { type: 'string', maxLength: 500 } } } } },
    async (request, reply) => {
      for (const token of pageAuth.keys()) if (store.byClientToken(token) === undefined) pageAuth.delete(token);
      const pending = store.pending().filter((s) => s.status === 'INITIALIZED' || pageAuth.has(s.clientToken));
      const html = renderWalletPage(pending, formKey, request.query.notice ?? '');
      return reply.type('text/html; charset=utf-8').send(html);
    },
  );

  app.post<{ Params: { token: string } }>(
    '/wallet/:token/disclose',
    { schema: { params: tokenParamsSchema } },
    async (request, reply) => {
      if (!keyMatches(request.body)) return refuseForm(reply);
      const session = store.byClientToken(request.params.token);
      if (session === undefined) return reply.redirect(backTo('That session is gone (finished or expired).'), 303);
      try {
        const sets = setsFromForm(session, request.body as URLSearchParams);
        if (session.status === 'INITIALIZED') {
          const auth = randomToken();
          store.connect(session, SERVER_VERSION, SERVER_VERSION, auth);
          pageAuth.set(session.clientToken, auth);
        }
        if (session.status === 'PAIRING') {
          const code = session.options.pairingCode ?? '';
          return reply.redirect(backTo(`Enter pairing code ${code} in the browser, then press Disclose again.`), 303);
        }
        store.assertConnectedClient(session, pageAuth.get(session.clientToken) ?? '');
        const body = { '@context': SIMULATED_DISCLOSURE_CONTEXT, disclosed: sets } as const;
        const proofStatus = store.submitDisclosure(session, body);
        pageAuth.delete(session.clientToken);
        return reply.redirect(backTo(`Disclosed: proof status ${proofStatus}.`), 303);
      } catch (e) {
        if (!(e instanceof YiviError)) throw e;
        return reply.redirect(backTo(`Not disclosed: ${e.type}${e.detail === '' ? '' : ` (${e.detail})`}.`), 303);
      }
    },
  );

  app.post<{ Params: { token: string } }>(
    '/wallet/:token/cancel',
    { schema: { params: tokenParamsSchema } },
    async (request, reply) => {
      if (!keyMatches(request.body)) return refuseForm(reply);
      const session = store.byClientToken(request.params.token);
      if (session !== undefined) store.cancel(session);
      pageAuth.delete(request.params.token);
      return reply.redirect(backTo('Cancelled.'), 303);
    },
  );
}

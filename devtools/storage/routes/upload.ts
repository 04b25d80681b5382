import { open, rm, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { verifyChallenge } from 'postguard-ts';
import { readExactBody } from '../body.js';
import type { StorageContext } from '../context.js';
import type { ChunkFault } from '../faults.js';
import { MailboxError, parseMailboxes } from '../mailboxes.js';
import { apiKeyFromHeader, validateApiKey, type ApiKeyCheck } from '../pkg.js';
import { RangeSyntaxError, parseContentRange, type ContentRange } from '../range.js';
import {
  DATA_NOT_COMPLETE,
  GENERIC_INTERNAL_ERROR,
  INCORRECT_RANGE,
  REPLAY_DIFFERS,
  TOKEN_MISMATCH,
  sendSessionNotFound,
  sendText,
  sendTooLarge,
} from '../replies.js';
import { SenderError, readSender } from '../sender.js';
import { Mutex, type MailLanguage, type UploadSession } from '../sessions.js';
import { chainHasher, randomToken, tokensEqual } from '../tokens.js';

/**
 * The upload side of the Cryptify protocol: init, chunk PUT (rolling token, exclusive
 * Content-Range end, idempotent replay of the last chunk), finalize and status. Checks run in
 * Cryptify's order, so each bad request gets the status Cryptify would give it.
 */

/** Rocket's JSON limit. */
const INIT_BODY_LIMIT = 1024 * 1024;
/** The init response's `challenge`: 32 random bytes, hex. */
const CHALLENGE_BYTES = 32;
/** Finalize's proof of possession: base64 of signChallenge(senderKey, uuid, challenge). */
const PROOF_HEADER = 'x-postguard-proof';
const BASE64 = /^[A-Z0-9+/]+={0,2}$/i;
/** Rocket reads at most chunk_size + 1 MiB of a chunk body before giving up on it. */
const BODY_SLACK = 1024 * 1024;

const UUID_FORMS = [
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  /^[0-9a-f]{32}$/i,
  /^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$/i,
  /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
];
/** The spellings Cryptify's UUID parser accepts (only the lowercase hyphenated one can name a session). */
export const isUuidSyntax = (text: string): boolean => UUID_FORMS.some((form) => form.test(text));

interface UploadHeaders {
  token: string;
  range: ContentRange;
}

/** The request guard Cryptify runs before its handlers: both headers present, the range parseable. */
function uploadHeaders(request: FastifyRequest, reply: FastifyReply): UploadHeaders | undefined {
  const token = request.headers['cryptifytoken'];
  const range = request.headers['content-range'];
  if (typeof token !== 'string') {
    sendText(reply, 400, 'Missing Cryptify Token header');
    return undefined;
  }
  if (typeof range !== 'string') {
    sendText(reply, 400, 'Missing content range');
    return undefined;
  }
  try {
    return { token, range: parseContentRange(range) };
  } catch (error) {
    if (!(error instanceof RangeSyntaxError)) throw error;
    sendText(reply, 400, `Bad Content-Range: ${error.message}`);
    return undefined;
  }
}

type InitBody = {
  recipient: string;
  mailContent: string;
  mailLang: MailLanguage;
  confirm: boolean;
  notifyRecipients: boolean;
};

/** serde's rules for the init body: a type error is a data error (422); unknown fields are ignored. */
function readInitBody(value: unknown): InitBody | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'expected a JSON object';
  const o = value as Record<string, unknown>;
  if (typeof o['recipient'] !== 'string') return 'recipient: expected a string';
  if (typeof o['mailContent'] !== 'string') return 'mailContent: expected a string';
  if (o['mailLang'] !== 'EN' && o['mailLang'] !== 'NL') return 'mailLang: expected "EN" or "NL"';
  if (typeof o['confirm'] !== 'boolean') return 'confirm: expected a boolean';
  const notify = o['notifyRecipients'];
  if (notify !== undefined && typeof notify !== 'boolean') return 'notifyRecipients: expected a boolean';
  return {
    recipient: o['recipient'],
    mailContent: o['mailContent'],
    mailLang: o['mailLang'],
    confirm: o['confirm'],
    notifyRecipients: notify ?? true,
  };
}

/** The whole body if it is at most `limit` bytes; undefined (reading stopped, socket kept for the answer) if larger. */
function readSmallBody(request: FastifyRequest, limit: number): Promise<Buffer | undefined> {
  const pieces: Buffer[] = [];
  let size = 0;
  return readExactBody(request.raw, limit, 0, (bytes) => {
    pieces.push(Buffer.from(bytes));
    size += bytes.length;
  }).then((result) => (result.abandoned ? undefined : Buffer.concat(pieces, size)));
}

const proofInvalid = (reply: FastifyReply, message: string): FastifyReply =>
  reply.code(403).type('application/json').send({ error: 'proof_invalid', message });

export async function uploadRoutes(app: FastifyInstance, ctx: StorageContext): Promise<void> {
  const { settings, store } = ctx;
  const filePath = (uuid: string) => join(ctx.dataDir, uuid);

  // Bodies are read by the handlers themselves, after the header checks, and streamed.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));

  app.post('/fileupload/init', async (request, reply) => {
    const raw = await readSmallBody(request, INIT_BODY_LIMIT);
    if (raw === undefined) return reply.header('connection', 'close').code(413).send();
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch (error) {
      return sendText(reply, 400, `Bad JSON: ${(error as Error).message}`);
    }
    const body = readInitBody(json);
    if (typeof body === 'string') return sendText(reply, 422, body);
    let recipients: string[];
    try {
      recipients = parseMailboxes(body.recipient);
    } catch (error) {
      if (!(error instanceof MailboxError)) throw error;
      return sendText(reply, 400, `Could not parse e-mail address: ${error.message}`);
    }

    // Not Cryptify's: a bound on uploads begun and not finished, checked before the PKG is asked or a
    // file is created.
    if (!store.hasRoomForUpload()) {
      return reply
        .header('retry-after', '60')
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('too many uploads in progress');
    }
    const apiKey = apiKeyFromHeader(request.headers.authorization);
    // Without a PKG to ask, a key earns nothing: the default tier, as for a rejected key.
    let check: ApiKeyCheck = { outcome: 'rejected' };
    if (apiKey !== undefined && settings.pkgUrl !== undefined) check = await validateApiKey(settings.pkgUrl, apiKey);

    const uuid = crypto.randomUUID();
    try {
      await (await open(filePath(uuid), 'wx')).close();
    } catch (error) {
      request.log.error({ err: error }, 'could not create the upload file');
      return sendText(reply, 500);
    }
    const now = settings.clock.now();
    const session: UploadSession = {
      uuid,
      token: randomToken(),
      uploaded: 0,
      recoveryToken: randomToken(),
      createdAt: Math.floor(now),
      recipients,
      mailContent: body.mailContent,
      mailLang: body.mailLang,
      confirm: body.confirm,
      notifyRecipients: body.notifyRecipients,
      tenant: check.outcome === 'valid' ? check.tenant : undefined,
      apiKeyValidationFailed: check.outcome === 'unreachable',
      lastChunk: undefined,
      finalized: 0,
      lastActive: now,
      lock: new Mutex(),
      challenge: crypto.getRandomValues(new Uint8Array(CHALLENGE_BYTES)),
      proofFailed: false,
    };
    store.add(session);
    return reply.header('cryptifytoken', session.token).send({
      uuid,
      recovery_token: session.recoveryToken,
      challenge: Buffer.from(session.challenge).toString('hex'),
      max_chunk_size_bytes: settings.chunkSize,
    });
  });

  app.put<{ Params: { uuid: string } }>('/fileupload/:uuid', async (request, reply) => {
    const headers = uploadHeaders(request, reply);
    if (headers === undefined) return reply;
    const { uuid } = request.params;
    if (!isUuidSyntax(uuid)) return sendSessionNotFound(reply, uuid, 'invalid_uuid');
    const session = store.get(uuid);
    if (session === undefined) return sendSessionNotFound(reply, uuid, 'expired_or_unknown');
    // A hung chunk is held outside the upload's lock, so the status call of a client that gave up
    // on it (a reloaded page) is answered.
    const start = headers.range.start;
    if (start !== undefined && ctx.faults.take('hold', Number(start)) !== undefined) {
      reply.hijack();
      await ctx.faults.hold(request.raw.socket);
      return reply;
    }
    return session.lock.run(() => putChunk(request, reply, session, headers));
  });

  async function putChunk(
    request: FastifyRequest,
    reply: FastifyReply,
    session: UploadSession,
    { token, range }: UploadHeaders,
  ): Promise<FastifyReply> {
    if (range.start === undefined) return sendText(reply, 400, 'Could not read Content-Range start');
    if (range.end === undefined) return sendText(reply, 400, 'Could not read Content-Range end');
    const { start: bigStart, end: bigEnd } = range;
    if (bigStart >= bigEnd) return sendText(reply, 400, INCORRECT_RANGE);
    if (bigEnd - bigStart > BigInt(settings.chunkSize)) {
      return sendText(reply, 400, `File chunk too large; the maximum is ${settings.chunkSize} bytes`);
    }
    // Decide before reading the body that it is the next chunk or a replay of the last one, so a
    // leaked UUID cannot make the server read chunk-sized bodies only to reject them.
    const isNext = bigStart === BigInt(session.uploaded) && tokensEqual(token, session.token);
    const last = session.lastChunk;
    const isReplay =
      !isNext && last !== undefined && bigStart === BigInt(last.start) && tokensEqual(token, last.prevToken);
    if (!isNext && !isReplay) {
      return sendText(reply, 400, bigStart !== BigInt(session.uploaded) ? INCORRECT_RANGE : TOKEN_MISMATCH);
    }
    // From here on start and end are below uploaded + chunk size: safe integers.
    const start = Number(bigStart);
    const length = Number(bigEnd - bigStart);
    const end = start + length;

    const before = ctx.faults.take('before', start);
    if (before !== undefined) return fail(request, reply, before.response);

    const hasher = chainHasher(token);
    const drain = () =>
      readExactBody(request.raw, length, BODY_SLACK, (bytes) => {
        hasher.update(bytes);
      });

    if (isReplay) {
      const body = await drain();
      if (!body.complete) return incomplete(reply, body.abandoned);
      if (hasher.digest('hex') !== last!.responseToken) return sendText(reply, 400, REPLAY_DIFFERS);
      store.touch(session);
      return reply.header('cryptifytoken', last!.responseToken).send();
    }

    const limit = session.tenant !== undefined ? settings.apiKeyPerUploadLimit : settings.perUploadLimit;
    if (end > limit) {
      const body = await drain();
      if (!body.complete) return incomplete(reply, body.abandoned);
      if (session.apiKeyValidationFailed) return sendText(reply, 503, GENERIC_INTERNAL_ERROR);
      return sendTooLarge(reply, {
        error: `Upload exceeds the per-upload limit of ${limit} bytes`,
        limit: 'per_upload',
        used_bytes: session.uploaded,
        limit_bytes: limit,
      });
    }

    const path = filePath(session.uuid);
    let file;
    try {
      file = await open(path, 'r+');
    } catch {
      const body = await drain();
      if (!body.complete) return incomplete(reply, body.abandoned);
      return sendSessionNotFound(reply, session.uuid, 'file_missing');
    }
    let position = start;
    let body;
    try {
      body = await readExactBody(request.raw, length, BODY_SLACK, async (bytes) => {
        hasher.update(bytes);
        let offset = 0;
        while (offset < bytes.length) {
          const { bytesWritten } = await file.write(bytes, offset, bytes.length - offset, position);
          offset += bytesWritten;
          position += bytesWritten;
        }
      });
    } catch (error) {
      await file.close();
      await truncate(path, start).catch(() => undefined);
      request.log.error({ err: error }, 'could not write a chunk');
      return sendText(reply, 500, GENERIC_INTERNAL_ERROR);
    }
    await file.close();
    if (!body.complete) {
      // Nothing of a rejected chunk stays behind the committed bytes.
      await truncate(path, start).catch(() => undefined);
      return incomplete(reply, body.abandoned);
    }
    const next = hasher.digest('hex');
    session.lastChunk = { prevToken: token, start, responseToken: next };
    session.token = next;
    session.uploaded = end;
    store.touch(session);

    const after = ctx.faults.take('after', start);
    if (after !== undefined) return fail(request, reply, after.response);
    return reply.header('cryptifytoken', next).send();
  }

  function incomplete(reply: FastifyReply, abandoned: boolean): FastifyReply {
    if (abandoned) reply.header('connection', 'close');
    return sendText(reply, 400, DATA_NOT_COMPLETE);
  }

  function fail(request: FastifyRequest, reply: FastifyReply, response: ChunkFault['response']): FastifyReply {
    if (typeof response !== 'number') {
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    return reply
      .header('connection', 'close')
      .code(response)
      .type('text/plain; charset=utf-8')
      .send('injected failure');
  }

  app.post<{ Params: { uuid: string } }>('/fileupload/finalize/:uuid', async (request, reply) => {
    const headers = uploadHeaders(request, reply);
    if (headers === undefined) return reply;
    const session = store.get(request.params.uuid);
    if (session === undefined) return sendSessionNotFound(reply, request.params.uuid, 'expired_or_unknown');
    return session.lock.run(() => finalize(request, reply, session, headers));
  });

  async function finalize(
    request: FastifyRequest,
    reply: FastifyReply,
    session: UploadSession,
    { token, range }: UploadHeaders,
  ): Promise<FastifyReply> {
    if (!tokensEqual(token, session.token)) return sendText(reply, 400, TOKEN_MISMATCH);
    if (range.size !== BigInt(session.uploaded)) return sendText(reply, 422);
    let sender;
    try {
      sender = await readSender(filePath(session.uuid), ctx.verifyingKey, settings.emailAttribute);
    } catch (error) {
      // Not Cryptify's 500: bytes that name no sender are the uploader's to fix, and say why.
      if (error instanceof SenderError) {
        return reply.code(422).type('application/json').send({ error: 'ciphertext_invalid', message: error.message });
      }
      request.log.error({ err: error }, 'could not read the sender from the uploaded header');
      return sendText(reply, 500, GENERIC_INTERNAL_ERROR);
    }
    // A proof of possession (pg-js 2.5): a signature by the sender's key over this upload's
    // challenge. None: the upload is unproven. One that fails: refused, and from then on this upload
    // needs a proof that verifies (a finalize without one is refused too, so a failed proof cannot be
    // followed by an unproven finalize). A good proof still finalizes it: only the holder of the
    // sender's key can make one, so the retry gives a forger nothing.
    const proof = request.headers[PROOF_HEADER];
    let proven = false;
    if (proof === undefined && session.proofFailed) {
      return proofInvalid(
        reply,
        `a proof of possession for this upload failed; finalize it with a valid ${PROOF_HEADER} or not at all`,
      );
    }
    if (proof !== undefined) {
      const signature =
        typeof proof === 'string' && BASE64.test(proof) ? new Uint8Array(Buffer.from(proof, 'base64')) : undefined;
      proven =
        signature !== undefined &&
        ctx.verifyingKey !== undefined &&
        verifyChallenge(ctx.verifyingKey, sender.policy, session.uuid, session.challenge, signature);
      if (!proven) {
        session.proofFailed = true;
        return proofInvalid(
          reply,
          ctx.verifyingKey === undefined
            ? 'this service has no PKG verifying key to check a proof of possession with'
            : `the ${PROOF_HEADER} signature does not prove the sender's key for this upload's challenge`,
        );
      }
    }
    // Counted once, mailed once: a second finalize (a retry after a lost answer, or a replay) is
    // answered as the first was, and neither sends mail again nor counts the bytes again.
    if (session.finalized > 0) {
      session.finalized++;
      return reply.code(200).send();
    }
    const now = Math.floor(settings.clock.now());
    // Who pays: an API key's tenant; else the sender named in the header only when a proof shows
    // the uploader holds the sender's key; else the uploader's address. A copy of someone's old file
    // must not spend that sender's quota (and lock them out of sending).
    const account =
      session.tenant !== undefined
        ? `api-key:${session.tenant}`
        : proven && sender.email !== undefined
          ? sender.email
          : `address:${request.ip}`;
    const limit = session.tenant !== undefined ? settings.apiKeyRollingLimit : settings.rollingLimit;
    const usage = ctx.usage.usage(account, now);
    if (usage.usedBytes + session.uploaded > limit) {
      store.remove(session.uuid);
      await rm(filePath(session.uuid), { force: true });
      const error = `Sender has exceeded the ${Math.floor(settings.rollingWindowSeconds / 86_400)}-day rolling limit of ${limit} bytes`;
      // Cryptify now keeps a sender's usage to itself: whoever holds an upload's token learns
      // nothing of what else that sender sent, or when.
      if (settings.strict) return sendTooLarge(reply, { error, limit: 'rolling_window', limit_bytes: limit });
      return sendTooLarge(reply, {
        error,
        limit: 'rolling_window',
        used_bytes: usage.usedBytes,
        limit_bytes: limit,
        ...(usage.oldestExpiresAt === undefined
          ? {}
          : { resets_at: new Date(usage.oldestExpiresAt * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z') }),
      });
    }
    ctx.outbox.record({
      uuid: session.uuid,
      recipients: session.recipients,
      notifyRecipients: session.notifyRecipients,
      confirm: session.confirm,
      lang: session.mailLang,
      message: session.mailContent,
      bytes: session.uploaded,
      createdAt: session.createdAt,
      sender: sender.email,
      senderAttributes: sender.attributes,
      senderVerified: sender.verified,
      senderProven: proven,
    });
    session.finalized++;
    ctx.usage.record(account, session.uploaded, now);
    return reply.code(200).send();
  }

  app.get<{ Params: { uuid: string } }>('/fileupload/:uuid/status', async (request, reply) => {
    const presented = request.headers['x-recovery-token'];
    const recovery = typeof presented === 'string' ? presented.trim() : '';
    if (recovery === '') return sendText(reply, 401);
    const session = store.get(request.params.uuid);
    if (session === undefined) return sendSessionNotFound(reply, request.params.uuid, 'expired_or_unknown');
    return session.lock.run(async () => {
      // An unknown upload and a wrong recovery token look the same, so UUIDs cannot be probed.
      if (!tokensEqual(recovery, session.recoveryToken)) {
        return sendSessionNotFound(reply, request.params.uuid, 'expired_or_unknown');
      }
      store.touch(session);
      const last = session.lastChunk;
      return reply.send({
        uploaded: session.uploaded,
        cryptify_token: session.token,
        ...(last === undefined ? {} : { prev_token: last.prevToken, prev_offset: last.start }),
      });
    });
  });
}

import type { MailLanguage } from './sessions.js';

/**
 * The notification e-mails Cryptify would send at finalize, recorded instead of sent. The
 * rules (who gets one, subject, link, reply-to, size text) follow Cryptify's; the bodies are
 * reduced to the facts a test can assert on.
 */

export interface OutboxMail {
  /** Position in the outbox, from 1. */
  seq: number;
  uuid: string;
  kind: 'recipient' | 'confirmation';
  to: string;
  /** The sender's e-mail on recipient mails; null on the sender's own confirmation. */
  replyTo: string | null;
  subject: string;
  lang: MailLanguage;
  /** `<publicUrl origin>/download?uuid=<uuid>&recipient=<to>`, or `<publicUrl page>?uuid=<uuid>&recipient=<to>`. */
  link: string;
  /** The sender's free text (`mailContent`), possibly empty. */
  message: string;
  /** Ciphertext size as the mail shows it, e.g. "1.5 MB". */
  size: string;
  bytes: number;
  /** Unix seconds: init + 14 days, as the mail's "expires on" line. */
  expiresAt: number;
  /** The sender's e-mail from the header; null if the e-mail attribute carried no value. */
  sender: string | null;
  senderAttributes: Array<[string, string]>;
  /** False when the stand-in had no verifying key and took the sender unverified. */
  senderVerified: boolean;
  /** The sender proved possession of its signing key at finalize (X-PostGuard-Proof). */
  senderProven: boolean;
}

export interface Finalized {
  uuid: string;
  recipients: readonly string[];
  notifyRecipients: boolean;
  confirm: boolean;
  lang: MailLanguage;
  message: string;
  bytes: number;
  createdAt: number;
  sender: string | undefined;
  senderAttributes: Array<[string, string]>;
  senderVerified: boolean;
  /** The sender proved possession of its signing key at finalize (X-PostGuard-Proof). */
  senderProven: boolean;
}

const STRINGS = {
  EN: { sentYouFiles: 'sent you files', confirmSubject: 'Your files have been sent via PostGuard' },
  NL: { sentYouFiles: 'heeft je bestanden gestuurd', confirmSubject: 'Je bestanden zijn verstuurd via PostGuard' },
} as const;

const EXPIRY_SECONDS = 14 * 24 * 3600;
const NAME_PAIR_CREDENTIALS = ['.pbdf.passport', '.pbdf.idcard', '.pbdf.drivinglicence'];

/** The name a recipient mail shows for the sender: a disclosed full name, a first+last name pair, else "PostGuard". */
export function senderDisplayName(attributes: ReadonlyArray<[string, string]>): string {
  const fullname = attributes.find(([t]) => t.endsWith('.gemeente.personalData.fullname'));
  if (fullname !== undefined && fullname[1] !== '') return fullname[1];
  for (const credential of NAME_PAIR_CREDENTIALS) {
    const first = attributes.find(([t]) => t.endsWith(`${credential}.firstName`));
    const last = attributes.find(([t]) => t.endsWith(`${credential}.lastName`));
    if (first !== undefined && last !== undefined && first[1] !== '' && last[1] !== '') return `${first[1]} ${last[1]}`;
  }
  return 'PostGuard';
}

/** 1024-based, one decimal: "0 B", "512.0 B", "1.5 kB", "3.2 MB". */
export function formatSize(bytes: number): string {
  if (bytes === 0) return '0 B';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  const i = Math.min(Math.floor(Math.log10(bytes) / Math.log10(1024)), units.length - 1);
  return `${(bytes / 1024 ** i).toFixed(1)} ${units[i]}`;
}

/**
 * The link a mail carries: Cryptify's `<origin>/download?uuid=…&recipient=…` for an origin (a URL
 * without a path), else the page given (an app's receive page) with `uuid` and `recipient` added.
 */
export function downloadLink(publicUrl: string, uuid: string, recipient: string): string {
  const given = new URL(publicUrl);
  const url = given.pathname === '/' ? new URL('/download', given) : given;
  url.searchParams.append('uuid', uuid);
  url.searchParams.append('recipient', recipient);
  return url.toString();
}

export class Outbox {
  private readonly mails: OutboxMail[] = [];
  private seq = 0;

  private readonly publicUrl: () => string;

  constructor(publicUrl: string | (() => string)) {
    this.publicUrl = typeof publicUrl === 'function' ? publicUrl : () => publicUrl;
  }

  /** Records what Cryptify would mail for one successful finalize. */
  record(upload: Finalized): OutboxMail[] {
    const strings = STRINGS[upload.lang];
    const base = {
      uuid: upload.uuid,
      lang: upload.lang,
      message: upload.message,
      size: formatSize(upload.bytes),
      bytes: upload.bytes,
      expiresAt: upload.createdAt + EXPIRY_SECONDS,
      sender: upload.sender ?? null,
      senderAttributes: upload.senderAttributes,
      senderVerified: upload.senderVerified,
      senderProven: upload.senderProven,
    };
    const added: OutboxMail[] = [];
    if (upload.notifyRecipients) {
      const subject = `${senderDisplayName(upload.senderAttributes)} ${strings.sentYouFiles}`;
      for (const to of upload.recipients) {
        const link = downloadLink(this.publicUrl(), upload.uuid, to);
        added.push({ ...base, seq: ++this.seq, kind: 'recipient', to, replyTo: upload.sender ?? null, subject, link });
      }
    }
    if (upload.confirm && upload.sender !== undefined) {
      const link = downloadLink(this.publicUrl(), upload.uuid, upload.sender);
      added.push({
        ...base,
        seq: ++this.seq,
        kind: 'confirmation',
        to: upload.sender,
        replyTo: null,
        subject: strings.confirmSubject,
        link,
      });
    }
    this.mails.push(...added);
    return added;
  }

  list(): readonly OutboxMail[] {
    return this.mails;
  }

  clear(): void {
    this.mails.length = 0;
  }
}

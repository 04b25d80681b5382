/**
 * The send form's address fields: recipients typed as one list (commas, semicolons, spaces or new
 * lines between them) and the sender's own address. Problems are sentences for the field's note.
 */

const EMAIL_SHAPE = /^[^\s@,;]+@[^\s@,;]+\.[^\s@,;.]+$/;
/** More recipients than a person types by hand; also bounds what one upload init carries. */
export const MAX_RECIPIENTS = 50;

export type AddressList = { ok: true; addresses: string[] } | { ok: false; problem: string };

/** The addresses in `text`, each once (compared without case), in the order typed. */
export function parseRecipients(text: string): AddressList {
  const parts = text.split(/[\s,;]+/).filter((p) => p !== '');
  if (parts.length === 0) return { ok: false, problem: 'Add at least one recipient.' };
  const bad = parts.find((p) => !EMAIL_SHAPE.test(p));
  if (bad !== undefined) return { ok: false, problem: `${bad} is not an e-mail address.` };
  const seen = new Set<string>();
  const addresses = parts.filter((p) => {
    const key = p.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  if (addresses.length > MAX_RECIPIENTS)
    return { ok: false, problem: `At most ${MAX_RECIPIENTS} recipients per upload.` };
  return { ok: true, addresses };
}

/** The sender's address: required here, since the storage service mails the recipients in its name. */
export function parseSender(text: string): { ok: true; address: string } | { ok: false; problem: string } {
  const address = text.trim();
  if (address === '') return { ok: false, problem: 'Enter your e-mail address: recipients see it as the sender.' };
  if (!EMAIL_SHAPE.test(address)) return { ok: false, problem: `${address} is not an e-mail address.` };
  return { ok: true, address };
}

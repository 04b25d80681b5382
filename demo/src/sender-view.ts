import { senderText, type SenderReport } from 'postguard-ts';
import { h } from './dom.js';

/**
 * A sender in the library's words (postguard-ts `senderText` over a SenderReport), never stronger
 * than what was proved: the headline as a badge with its explanation, then each identity under
 * its label. A claim (before a full read) reads "Claimed sender"; only a file read to its end
 * reads "Verified".
 */
export function senderView(report: SenderReport): HTMLElement {
  const text = senderText(report);
  return h(
    'div',
    { class: 'sender-report', 'data-standing': report.standing },
    h('p', {}, h('span', { class: 'badge', 'data-standing': report.standing }, text.headline), ` ${text.explanation}`),
    ...text.lines.flatMap((line) => [
      h('p', { class: 'sender-label' }, `${line.label}:`),
      h(
        'ul',
        { class: 'identity' },
        ...line.attributes.map((a) => h('li', {}, `${a.name}: `, h('strong', {}, a.value))),
      ),
    ]),
    text.note === undefined ? null : h('p', { class: 'note demo-credentials' }, text.note),
  );
}

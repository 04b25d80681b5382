import { SENDER_WORDING, type SenderReport } from 'postguard-ts';
import { identityLines } from './attributes.js';
import { h } from './dom.js';

/**
 * A sender in the library's words (lib/sender.ts SenderReport), never stronger than what was
 * proved: the headline as a badge with its explanation, then each identity under its label. A
 * claim (before a full read) reads "Claimed sender"; only a file read to its end reads "Verified".
 */
export function senderView(report: SenderReport): HTMLElement {
  return h(
    'div',
    { class: 'sender-report', 'data-standing': report.standing },
    h(
      'p',
      {},
      h('span', { class: 'badge', 'data-standing': report.standing }, report.headline),
      ` ${report.explanation}`,
    ),
    ...report.lines.flatMap((line) => [
      h('p', { class: 'sender-label' }, `${line.label}:`),
      h(
        'ul',
        { class: 'identity' },
        ...identityLines(line.policy).map((l) => h('li', {}, `${l.label}: `, h('strong', {}, l.value))),
      ),
    ]),
    report.demoCredentials ? h('p', { class: 'note demo-credentials' }, SENDER_WORDING.demoCredentials) : null,
  );
}

import type { FeedbackPageView } from './schemas.js';
import { htmlDocument as page } from '../../core/page.js';
import { escapeHtml } from '../../core/text.js';

/**
 * ticketd's own rating page, for installations without the admin dashboard: plain HTML, no script,
 * one form that posts back to the same URL. Every value is escaped; core/page.ts sends it.
 */

const CHOICES: Record<FeedbackPageView['ratingType'], [number, string][]> = {
  thumbs: [
    [1, 'Good, I am satisfied'],
    [-1, 'Bad, I am not satisfied'],
  ],
  scale5: [1, 2, 3, 4, 5].map((n) => [n, String(n)]),
  scale10: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => [n, String(n)]),
};

/** The form: one button per rating, and an optional comment. */
export function ratingForm(view: FeedbackPageView, action: string): string {
  const scale = view.ratingType === 'thumbs' ? '' : `<p>${view.ratingType === 'scale5' ? '1 is poor, 5 is excellent.' : '1 is poor, 10 is excellent.'}</p>`;
  const buttons = CHOICES[view.ratingType].map(([value, label]) => `<button type="submit" name="rating" value="${value}">${escapeHtml(label)}</button>`).join('');
  return page(
    `Rate ${view.brand.name}`,
    `<h1>How did ${escapeHtml(view.brand.name)} do?</h1>
<p>Your request ${escapeHtml(view.ticket.publicId)} “${escapeHtml(view.ticket.title)}” was resolved. How would you rate the help you got?</p>${scale}
<form method="post" action="${escapeHtml(action)}"><label for="comment">A comment (optional)</label><textarea id="comment" name="comment" maxlength="5000"></textarea><div>${buttons}</div></form>`,
  );
}

export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}

/**
 * The new part of a reply: quoted history and signatures cut off, as well as plain text allows.
 * Cut at the first of
 * - an attribution line: "On <date>, <name> wrote:" (also wrapped over two lines), and its French,
 *   German, Spanish, Dutch, Italian and Portuguese forms;
 * - Outlook's "-----Original Message-----", or a header block "From: …" followed within a few lines
 *   by "Sent:"/"Date:" (also after a "____" rule);
 * - the signature delimiter "-- " (RFC 3676), or a mobile footer ("Sent from my iPhone", "Get Outlook for iOS");
 * then a block of ">"-quoted lines at the end is dropped. Forwarded messages are kept: they are
 * content, not history. When nothing would be left, the text is returned as it was.
 */

const ATTRIBUTION = [
  /^On\b.{1,300}\bwrote:\s*$/i,
  /^Le\b.{1,300}\ba [ée]crit\s*:\s*$/i,
  /^Am\b.{1,300}\bschrieb\b.{0,300}:\s*$/i,
  /^El\b.{1,300}\bescribi[óo]\s*:\s*$/i,
  /^Op\b.{1,300}\bschreef\b.{0,300}:\s*$/i,
  /^Il giorno\b.{1,300}\bha scritto\s*:\s*$/i,
  /^Em\b.{1,300}\bescreveu\s*:\s*$/i,
];
const ORIGINAL_MESSAGE = /^\s*-{2,}\s*(Original Message|Urspr[üu]ngliche Nachricht|Message d'origine|Mensaje original)\s*-{2,}\s*$/i;
const HEADER_FROM = /^\s*\*?(From|Von|De)\s*:\*?\s+\S/i;
const HEADER_SENT = /^\s*\*?(Sent|Date|Gesendet|Envoy[ée]|Enviado)\s*:\*?\s+\S/i;
const RULE = /^\s*_{5,}\s*$/;
const FORWARDED = /^\s*(-{2,}\s*Forwarded message\s*-{2,}|Begin forwarded message:)\s*$/i;
const SIGNATURE = /^-- ?$/;
const MOBILE_FOOTER =
  /^\s*(Sent from my \S.{0,40}|Sent from (Mail|Outlook) for \S.{0,30}|Get Outlook for (iOS|Android)\S{0,20}|Envoy[ée] de mon \S.{0,40}|Von meinem \S.{0,40} gesendet)\s*$/i;

function isAttribution(line: string, next: string | undefined): boolean {
  const single = line.trim();
  if (ATTRIBUTION.some((re) => re.test(single))) return true;
  // Clients wrap long attributions: "On Mon, 1 Jan 2024 at 10:00, Jane Doe <" / "jane@example.com> wrote:"
  return next !== undefined && /^(On|Le|Am|El|Op|Em|Il giorno)\b/i.test(single) && ATTRIBUTION.some((re) => re.test(`${single} ${next.trim()}`));
}

function isOutlookHeader(lines: string[], i: number): boolean {
  if (!HEADER_FROM.test(lines[i]!)) return false;
  return lines.slice(i + 1, i + 5).some((l) => HEADER_SENT.test(l));
}

/** Where the quoted history or signature starts, or lines.length. */
function cutIndex(lines: string[]): number {
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (FORWARDED.test(line)) break; // what follows is the forwarded message, with its own headers
    if (isAttribution(line, lines[i + 1]) || ORIGINAL_MESSAGE.test(line) || SIGNATURE.test(line) || MOBILE_FOOTER.test(line)) return i;
    if (isOutlookHeader(lines, i)) return i > 0 && RULE.test(lines[i - 1]!) ? i - 1 : i;
  }
  return lines.length;
}

export function stripQuotedReply(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let kept = lines.slice(0, cutIndex(lines));
  // A ">"-quoted block (and blank lines) at the end.
  let end = kept.length;
  while (end > 0 && (/^\s*>/.test(kept[end - 1]!) || !kept[end - 1]!.trim())) end--;
  kept = kept.slice(0, end);
  const result = kept.join('\n').trim();
  return result || text.trim();
}

import { randomFillSync } from 'node:crypto';
import { BASE32_ALPHABET as ALPHABET } from './base32.js';

/** Wire prefixes of every id kind. */
export const ID_PREFIX = {
  account: 'acct',
  member: 'mem',
  session: 'sess',
  magicLink: 'mlk',
  portalToken: 'ptk',
  portalLink: 'plk',
  apiKey: 'key',
  brand: 'br',
  category: 'cat',
  tag: 'tag',
  status: 'st',
  field: 'fld',
  contact: 'cus',
  /** What an erased contact's email and name become. */
  erasure: 'ers',
  company: 'co',
  blockedSource: 'blk',
  ticket: 'tkt',
  comment: 'cmt',
  request: 'req',
  auditEntry: 'log',
  watcher: 'wch',
  /** An order's link to a ticket; the automatic ones are made in SQL by ticketd_new_id() (flows/order-links.ts). */
  orderLink: 'olk',
  mention: 'mnt',
  featureRequest: 'fr',
  attachment: 'att',
  mailMessage: 'mail',
  inboundEmail: 'inb',
  rawMail: 'raw',
  webhook: 'wh',
  brandDomain: 'dom',
  emailConnection: 'ec',
  ssoConnection: 'sso',
  ssoAttempt: 'ssa',
  form: 'form',
  recurringTicket: 'rec',
  /** Triggers and automations (one table, by kind), macros and shared views. */
  rule: 'rule',
  macro: 'mac',
  view: 'view',
  /** A brand's connected online store, and the orders and products its sync keeps. */
  commerceStore: 'store',
  commerceOrder: 'ord',
  commerceProduct: 'prod',
  subscription: 'sub',
  checkout: 'chk',
  /** A run of `ticketd import` (import_runs). */
  importRun: 'imp',
  signupCheckout: 'suc',
  invoice: 'inv',
  couponRedemption: 'rdm',
  /** Satisfaction ratings; made in SQL by ticketd_new_id() when a ticket is resolved (see the ticket_feedback migration). */
  feedback: 'fb',
  /** Outbox rows; made in SQL by ticketd_new_id() (see the outbox migration). */
  delivery: 'dlv',
  event: 'evt',
} as const;

/**
 * The last random part of each prefix, with its millisecond. Kept per prefix: audit entries take
 * their time from the services' clock, other ids from the process's, and ids made in one
 * millisecond of one clock must still sort in creation order when the other's come between.
 */
const last = new Map<string, { time: number; random: number[] }>();

/**
 * Random bytes drawn from the system's generator 4 KiB at a time, as node's randomUUID does: one
 * call per id into it cost several microseconds, and a write makes ids for each of its rows.
 */
const pool = Buffer.alloc(4096);
let taken = pool.length;
function randomDigits(n: number): number[] {
  if (taken + n > pool.length) {
    randomFillSync(pool);
    taken = 0;
  }
  const digits = Array.from(pool.subarray(taken, taken + n), (b) => b % 32);
  taken += n;
  return digits;
}

/** The next 80-bit random part: fresh in a new millisecond, incremented within the same one. */
function randomPart(prefix: string, now: number): number[] {
  const previous = last.get(prefix);
  if (previous?.time === now) {
    const random = previous.random;
    let i = random.length - 1;
    while (i >= 0 && random[i] === 31) random[i--] = 0;
    if (i >= 0) {
      random[i]!++;
      return random;
    }
  }
  const random = randomDigits(16);
  random[0] = random[0]! % 16; // headroom: increments never wrap within a millisecond
  last.set(prefix, { time: now, random });
  return random;
}

/**
 * A prefixed, time-sortable id: 10 base32 chars of milliseconds, then 16 of randomness (80 bits),
 * like a monotonic ULID. Ids made by one process sort in creation order, even within a millisecond,
 * which keyset pagination and "oldest first" lists rely on.
 */
export function newId(prefix: string, now = Date.now()): string {
  return `${idTimePrefix(prefix, now)}${randomPart(prefix, now)
    .map((d) => ALPHABET[d])
    .join('')}`;
}

/**
 * The start every id made in millisecond `ms` shares: ids of that millisecond sort at or after it,
 * ids of earlier ones before it. Turns a time range into an id range (the audit log's date filter).
 */
export function idTimePrefix(prefix: string, ms: number): string {
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[ms % 32] + time;
    ms = Math.floor(ms / 32);
  }
  return `${prefix}_${time}`;
}

/** Brand ids are `br_…`; clients of the hosted product also send the workspace spelling `ws_…`. */
export function normalizeBrandId(id: string): string {
  return id.startsWith('ws_') ? `br_${id.slice(3)}` : id;
}

/**
 * What the kernel needs from the outside world, named here and implemented in server/integrations/
 * (local disk and nodemailer today): the kernel and the domains speak of these, never of an
 * implementation, so the integrations sit above the kernel and the process's wiring picks them.
 */
import type { Readable } from 'node:stream';

/** What a finished write measured. */
export interface StoredObject {
  size: number;
  sha256: string;
}

/** Bytes written to a staging area, not yet visible under any key. */
export interface StagedObject extends StoredObject {
  /** Moves the bytes under `key` atomically (replacing what was there). */
  commit(key: string): Promise<void>;
  /** Throws the bytes away; harmless after commit or a second time. */
  discard(): Promise<void>;
  /** A read stream of the staged bytes (before commit), for a virus scanner. */
  read(): Readable;
}

/**
 * Where attachment bytes live. Keys are attachment ids (never a client's file name). A write
 * goes to a staging area first and is moved under its key in one step, so a reader never sees
 * a half-written object. Another backend (S3, …) implements the same calls.
 */
export interface Storage {
  /** Streams `source` into staging, hashing as it goes; more than `maxBytes` rejects with ByteLimitExceeded. */
  stage(source: Readable, maxBytes: number): Promise<StagedObject>;
  /** stage + commit: the object is under `key` when this resolves. */
  put(key: string, source: Readable, maxBytes: number): Promise<StoredObject>;
  /** A read stream of the object, or null when there is none. */
  open(key: string): Promise<{ stream: Readable; size: number } | null>;
  delete(key: string): Promise<void>;
  exists(key: string): Promise<boolean>;
  /** Removes staged bytes older than `before` that a crashed process left behind; returns how many. */
  purgeStaging(before: Date): Promise<number>;
  /** Every object held with its size, in no particular order (`storage migrate` copies them, `db backup` lists them). */
  list(): AsyncIterable<{ key: string; size: number }>;
  /**
   * A URL that serves the object itself for `seconds`, with these response headers, when the
   * backend and the operator allow one (a bucket's presigned URL); null: ticketd streams it.
   */
  directDownloadUrl(key: string, seconds: number, headers: { contentType: string; contentDisposition: string }): Promise<string | null>;
}

/** What a virus scanner found in a file. */
export type ScanVerdict = { infected: false } | { infected: true; signature: string };

/** A virus scanner (clamd today): scan rejects when it could not give a verdict (down, slow, refused the file). */
export interface Scanner {
  scan(source: Readable): Promise<ScanVerdict>;
  /** Resolves when the scanner answers. */
  ping(): Promise<void>;
}

export interface MailAddress {
  name?: string | null;
  address: string;
}

export type MailKind = 'agent_reply' | 'autoresponse' | 'watcher_notification' | 'mention' | 'overdue' | 'sign_in' | 'invitation' | 'portal_link' | 'csat' | 'rule' | 'test';

export interface MailMessage {
  kind: MailKind;
  from: MailAddress;
  to: MailAddress[];
  cc: MailAddress[];
  /** The address replies go to (routes back to the ticket); null for none. */
  replyTo: string | null;
  subject: string;
  text: string;
  html: string;
  /** `<id@domain>`, derived from the event that caused the message. */
  messageId: string;
  inReplyTo: string | null;
  references: string[];
  /** Extra headers: X-Ticketd-Brand, Auto-Submitted, … */
  headers: Record<string, string>;
  /**
   * The brand's own domain it goes out from (a verified primary OUTBOUND brand domain when it was
   * queued): sent from `from` here, DKIM-signed by the domain, bounces to `bounces.<domain>`, if
   * the domain is still verified and primary when sent; otherwise as the `from` above says.
   */
  brandDomain?: { id: string; domain: string; from: MailAddress };
}

/** How a message from a brand's own domain is sent: signed by the domain, its bounces coming back to the domain's return path. */
export interface DomainSigning {
  /** The envelope sender (MAIL FROM, which receivers record as Return-Path). */
  envelopeFrom: string;
  /** nodemailer's dkim option. */
  dkim: { domainName: string; keySelector: string; privateKey: string };
}

export interface SentMail {
  messageId: string;
  transport: 'file' | 'smtp';
  /** file transport: where the message was written. */
  path?: string;
  /** smtp transport: the relay's final answer. */
  response?: string;
}

export interface MailTransport {
  readonly kind: 'file' | 'smtp';
  send(message: MailMessage, signing?: DomainSigning): Promise<SentMail>;
  close(): void;
}

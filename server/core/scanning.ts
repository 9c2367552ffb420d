import type { Readable } from 'node:stream';
import { HttpError } from './errors.js';
import type { Services } from './services.js';

/**
 * What became of a stored file's virus scan: clean (the scanner found nothing); unscanned (scanning
 * is on, the scanner was down or slow, and scanFailure allowed the file in); not_scanned (no scanner
 * was configured when it was stored, or its bytes have not arrived yet).
 */
export type ScanStatus = 'clean' | 'unscanned' | 'not_scanned';
export const SCAN_STATUSES: readonly ScanStatus[] = ['clean', 'unscanned', 'not_scanned'];

/** A file's scan: its status, or the signature found in it. */
export type ScanOutcome = { status: ScanStatus } | { infected: string };

/**
 * Streams a staged file (`read` opens it) through the configured scanner, never inside a
 * transaction (it is network I/O). The scanner down or slow: 503 scanner_unavailable (with
 * Retry-After) under scanFailure refuse, else the file goes on as unscanned.
 */
export async function scanFile(services: Services, read: () => Readable, what: Record<string, unknown> = {}): Promise<ScanOutcome> {
  const scanner = services.scanner;
  if (!scanner) return { status: 'not_scanned' };
  try {
    const verdict = await scanner.scan(read());
    return verdict.infected ? { infected: verdict.signature } : { status: 'clean' };
  } catch (err) {
    services.log.warn({ ...what, err: (err as Error).message }, 'the virus scanner gave no verdict');
    if (services.config.scanning.scanFailure === 'allow') return { status: 'unscanned' };
    throw new HttpError(503, 'scanner_unavailable', 'The virus scanner is not answering, and uploads are not taken unscanned; retry shortly');
  }
}

export const infected = (signature: string) =>
  new HttpError(422, 'attachment_infected', `The file contains a virus (${signature}); it was not kept`, [{ field: 'file', message: `contains ${signature}` }], { signature });

/** scanFile for an upload: an infected file is a 422 attachment_infected naming the signature. */
export async function scanUpload(services: Services, read: () => Readable, what: Record<string, unknown> = {}): Promise<ScanStatus> {
  const outcome = await scanFile(services, read, what);
  if ('infected' in outcome) throw infected(outcome.infected);
  return outcome.status;
}

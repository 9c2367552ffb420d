/** The only place the CLI writes output or asks questions. */
import { Presets, SingleBar } from 'cli-progress';

// The prompts' modules load on a terminal only, when a question is asked: scripts never need them.
const prompts = () => import('@inquirer/prompts');

/** Wrong or missing arguments: exit code 2. */
export class UsageError extends Error {}

export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** A failure the command has already reported in its output: exit 1, print nothing more. */
export class ReportedFailure extends Error {}

export function canPrompt(): boolean {
  return Boolean(process.stdin.isTTY && process.stdout.isTTY);
}

/** A result: JSON on one line for scripts, or readable lines for people. */
export function emit(json: boolean, data: unknown, human: () => string[]): void {
  if (json) process.stdout.write(`${JSON.stringify(data)}\n`);
  else process.stdout.write(`${human().join('\n')}\n`);
}

/** A document as it is (one a command exports), for a file or a pipe. */
export function emitText(text: string): void {
  process.stdout.write(text);
}

/** A document written as it is made (an export), to a file or to stdout. */
export async function writeDocument(chunks: AsyncIterable<string>, file?: string): Promise<void> {
  const { pipeline } = await import('node:stream/promises');
  const { Readable } = await import('node:stream');
  if (file) {
    const { createWriteStream } = await import('node:fs');
    await pipeline(Readable.from(chunks), createWriteStream(file));
  } else {
    for await (const chunk of chunks) if (!process.stdout.write(chunk)) await new Promise((done) => process.stdout.once('drain', done));
  }
}

/** Progress and notices go to stderr, so stdout stays machine-readable. */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** A failure: always on stderr; for --json callers also as `{ error: { code, message } }` on stdout. */
export function fail(message: string, json?: { code: string; problems?: string[] }): void {
  process.stderr.write(`error: ${message}\n`);
  if (json) process.stdout.write(`${JSON.stringify({ error: { code: json.code, message, ...(json.problems ? { problems: json.problems } : {}) } })}\n`);
}

/** A value from its flag, else from a prompt on a TTY, else a usage error naming the flag. */
export async function need(value: string | undefined, flag: string, question: string, fallback?: string): Promise<string> {
  if (value !== undefined && value !== '') return value;
  if (!canPrompt()) {
    if (fallback !== undefined) return fallback;
    throw new UsageError(`missing ${flag} (no terminal to ask on)`);
  }
  return (await prompts()).input({ message: question, default: fallback, required: true });
}

/** A secret: the flag, else the environment variable, else asked without echo on a terminal. */
export async function needSecret(value: string | undefined, flag: string, envName: string, question: string): Promise<string> {
  const given = value ?? process.env[envName];
  if (given !== undefined && given !== '') return given;
  if (!canPrompt()) throw new UsageError(`missing ${flag} (or ${envName}; no terminal to ask on)`);
  return (await prompts()).password({ message: question, mask: true, validate: (v) => v.length > 0 || 'required' });
}

export async function choose<T extends string>(question: string, choices: { name: string; value: T }[]): Promise<T> {
  return (await prompts()).select({ message: question, choices });
}

export async function confirmOrFlag(yes: boolean | undefined, question: string): Promise<boolean> {
  if (yes) return true;
  if (!canPrompt()) throw new UsageError('this changes data: pass --yes to confirm');
  return (await prompts()).confirm({ message: question, default: false });
}

export function table(rows: Record<string, unknown>[], columns: string[]): string[] {
  if (rows.length === 0) return ['(none)'];
  const cells = rows.map((r) => columns.map((c) => (r[c] === null || r[c] === undefined ? '-' : String(r[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns), ...cells.map(line)];
}

/** A progress bar on stderr when it is a terminal (else nothing): update(done, total), then stop(). */
export function progressBar(unit: string): { update(done: number, total: number): void; stop(): void } {
  if (!process.stderr.isTTY) return { update: () => undefined, stop: () => undefined };
  const bar = new SingleBar({ format: `{bar} {value}/{total} ${unit}`, stream: process.stderr, hideCursor: true }, Presets.shades_classic);
  let started = false;
  return {
    update(done, total) {
      if (!started) bar.start(total, 0);
      started = true;
      bar.setTotal(total);
      bar.update(done);
    },
    stop() {
      if (started) bar.stop();
      started = false;
    },
  };
}

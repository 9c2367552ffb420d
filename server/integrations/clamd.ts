import net from 'node:net';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../core/config.js';
import type { Scanner, ScanVerdict } from '../core/ports.js';

/** Where clamd listens: its Unix socket, or its TCP address. */
export type ClamdAddress = { socket: string } | { host: string; port: number };

/** clamd gave no verdict: it was down, slower than the deadline, or refused the file (its StreamMaxLength). */
export class ScannerUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScannerUnavailable';
  }
}

/** Frames bytes as INSTREAM wants them: each chunk after its length (4 bytes, big-endian), a zero length at the end. */
function instreamChunks(): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(chunk.length);
      this.push(length);
      done(null, chunk);
    },
    flush(done) {
      done(null, Buffer.alloc(4));
    },
  });
}

const FOUND = /^stream: (.+) FOUND$/;

/**
 * A clamd client speaking its socket protocol (INSTREAM, PING). Written here rather than taken from
 * the clamscan package: its stream scan never settles when clamd accepts a connection and then does
 * not answer (a stalled daemon), whatever its timeout, and sends an empty file as an unknown command
 * (docs/decisions/0119-scanning-uploads-with-clamd.md). Every call has one deadline for all of it,
 * past which its connection is destroyed.
 */
export class ClamdScanner implements Scanner {
  constructor(
    readonly address: ClamdAddress,
    readonly timeoutMs: number,
  ) {}

  /** One command's exchange: the connection, what `send` writes, clamd's whole answer (it closes after it). */
  private async exchange(command: string, send: (socket: net.Socket) => Promise<void>): Promise<string> {
    const where = 'socket' in this.address ? this.address.socket : `${this.address.host}:${this.address.port}`;
    const socket = net.connect('socket' in this.address ? { path: this.address.socket } : { host: this.address.host, port: this.address.port });
    const chunks: Buffer[] = [];
    const answered = new Promise<string>((resolve, reject) => {
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.once('end', () => resolve(Buffer.concat(chunks).toString('utf8').replace(/\0+$/, '').trim()));
      socket.once('close', () => reject(new ScannerUnavailable(`clamd at ${where} closed the connection without an answer to ${command}`)));
      socket.once('error', (err) => reject(new ScannerUnavailable(`clamd at ${where}: ${err.message}`)));
    });
    answered.catch(() => undefined); // awaited below, after the sending
    const deadline = setTimeout(() => socket.destroy(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    try {
      const connected = await new Promise<boolean>((resolve) => socket.once('connect', () => resolve(true)).once('close', () => resolve(false)));
      if (connected) {
        socket.write(`z${command}\0`);
        // clamd may answer (and close) before it has read everything, e.g. past its StreamMaxLength: its answer says why.
        await send(socket).catch(() => undefined);
      }
      return await answered;
    } finally {
      clearTimeout(deadline);
      socket.destroy();
    }
  }

  async scan(source: Readable): Promise<ScanVerdict> {
    const answer = await this.exchange('INSTREAM', (socket) => pipeline(source, instreamChunks(), socket)).finally(() => source.destroy());
    if (answer === 'stream: OK') return { infected: false };
    const found = FOUND.exec(answer);
    if (found) return { infected: true, signature: found[1]! };
    throw new ScannerUnavailable(`clamd did not scan the file: ${answer || 'no answer'}`);
  }

  async ping(): Promise<void> {
    const answer = await this.exchange('PING', async () => undefined);
    if (answer !== 'PONG') throw new ScannerUnavailable(`clamd answered PING with ${JSON.stringify(answer)}`);
  }
}

/** The scanner a configuration names, or null when scanning is off. */
export function scannerFromConfig(config: Pick<Config, 'scanning'>): Scanner | null {
  const { clamdSocket, clamdHost, clamdPort, timeoutMs } = config.scanning;
  if (clamdSocket) return new ClamdScanner({ socket: clamdSocket }, timeoutMs);
  if (clamdHost) return new ClamdScanner({ host: clamdHost, port: clamdPort }, timeoutMs);
  return null;
}

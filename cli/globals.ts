/** The options every command shares (declared on the program in main.ts). */
export interface GlobalOptions {
  config?: string;
}

/** Set by `start` once the server runs: bin/ticketd then lets the process live on until a signal stops it. */
export const runState = { serving: false };

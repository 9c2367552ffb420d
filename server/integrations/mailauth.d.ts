// The part of mailauth (CommonJS, no typings of its own) that inbound mail uses.
declare module 'mailauth' {
  interface AuthStatus {
    result: string;
    comment?: string;
  }
  export interface AuthenticateResult {
    dkim: { results?: { signingDomain?: string; selector?: string; status: AuthStatus }[] };
    spf: { domain?: string; status: AuthStatus } | false;
    dmarc: { domain?: string; policy?: string; status: AuthStatus } | false;
    /** signature: the latest ARC-Message-Signature, whose d= sealed the chain. */
    arc: { status: AuthStatus; i?: number | false; signature?: { signingDomain?: string } | false } | false;
  }
  export function authenticate(
    message: Buffer | string,
    options: {
      ip?: string;
      helo?: string;
      sender?: string;
      mta?: string;
      resolver?: (name: string, rrtype: string) => Promise<unknown>;
      disableBimi?: boolean;
      /** ARC-seal the message as this domain (what a forwarder does; the tests do it). */
      seal?: { signingDomain: string; selector: string; privateKey: string };
    },
  ): Promise<AuthenticateResult & { headers: string }>;
}

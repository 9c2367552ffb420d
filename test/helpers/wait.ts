/** Polls `cond` until it holds; fails after `ms` (a bound on something that should happen, never a speed measure). */
export async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

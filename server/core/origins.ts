import type { Config } from './config.js';
import { part, type Services } from './services.js';

/**
 * The dashboard origins: where a sign-in link may point and which browser origins may call the API
 * with the session cookie. Configured ones (`dashboardOrigins`), plus any loopback origin unless
 * `dashboardAllowLoopback` is off (a dashboard run on the operator's own machine).
 */

/** `scheme://host[:port]` as browsers send it (lower case, default port dropped), or null when `value` is not a bare http(s) origin. */
export function normalizeOrigin(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.username || url.password || url.pathname !== '/' || url.search || url.hash || /[?#]/.test(value)) return null;
  return url.origin;
}

function isLoopback(origin: string): boolean {
  const { hostname } = new URL(origin);
  return hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

export type OriginCheck = (origin: string | undefined) => boolean;

export function dashboardOriginCheck(config: Pick<Config, 'dashboardOrigins' | 'dashboardAllowLoopback'>): OriginCheck {
  const allowed = new Set(config.dashboardOrigins.map(normalizeOrigin).filter((o): o is string => o !== null));
  return (origin) => {
    const normal = origin ? normalizeOrigin(origin) : null;
    if (!normal) return false;
    return allowed.has(normal) || (config.dashboardAllowLoopback && isLoopback(normal));
  };
}

const originsPart = part('dashboard.origins', (services) => dashboardOriginCheck(services.config));

/** Whether `origin` is one of the dashboard origins of this server's configuration. */
export function isDashboardOrigin(services: Services, origin: string | undefined): boolean {
  return services.get(originsPart)(origin);
}

import type { CommerceConnector, ConnectorOptions } from './commerce.js';

/** The connector of a platform, or null for one ticketd cannot connect yet; each loaded on first use. */
export async function connectorFor(platform: string, options: ConnectorOptions): Promise<CommerceConnector | null> {
  if (platform === 'BIGCOMMERCE') {
    const { BigCommerceConnector } = await import('./bigcommerce.js');
    return new BigCommerceConnector(options);
  }
  return null;
}

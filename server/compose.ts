import { assembleServices, type ServiceDeps, type Services } from './core/services.js';
import { scannerFromConfig } from './integrations/clamd.js';
import { mailTransport } from './integrations/mail.js';
import { storageFromConfig } from './integrations/storage-from-config.js';

/**
 * A process's services with the integrations this installation uses: the one place the kernel's
 * ports (core/ports.ts) meet their implementations, for the API, the dispatcher, the CLI and tests.
 */
export function createServices(deps: Omit<ServiceDeps, 'adapters'>): Services {
  return assembleServices({ ...deps, adapters: { storage: storageFromConfig, mailTransport, scanner: scannerFromConfig } });
}

import { fileURLToPath } from 'node:url';

// Compiled to dist/server/core/paths.js, so the package root is three levels up.
export const packageRoot = fileURLToPath(new URL('../../..', import.meta.url));
export const distRoot = fileURLToPath(new URL('../..', import.meta.url));

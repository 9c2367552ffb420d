import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from './paths.js';

export const version: string = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')).version;

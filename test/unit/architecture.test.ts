/**
 * Keeps the layering of the design card true by reading imports:
 * routes -> service -> model, CLI -> services, no Fastify below routes, no env reads in services.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { packageRoot } from '../../server/core/paths.js';

function sources(dir: string): string[] {
  return (readdirSync(path.join(packageRoot, dir), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

function importsOf(file: string): string[] {
  const text = readFileSync(path.join(packageRoot, file), 'utf8');
  return [...text.matchAll(/^\s*import\s[^;]*?from\s+'([^']+)'/gms)].map((m) => m[1]!);
}

const domainFiles = sources('server/domains');
const domainOf = (file: string) => file.split(path.sep)[2];

t.test('there are domains to check', async (t) => {
  t.ok(domainFiles.some((f) => f.endsWith('routes.ts')));
  t.ok(domainFiles.some((f) => f.endsWith('service.ts')));
});

t.test("routes use their own schemas and service, never knex, models or another domain's internals", async (t) => {
  for (const file of domainFiles.filter((f) => f.endsWith('routes.ts'))) {
    for (const spec of importsOf(file)) {
      t.notOk(['knex', 'objection', 'pg'].includes(spec), `${file} imports ${spec}`);
      t.notOk(spec.endsWith('model.js'), `${file} imports a model (${spec})`);
      if (spec.startsWith('../') && !spec.startsWith('../../')) {
        t.notOk(/\/(service|model)\.js$/.test(spec), `${file} reaches into another domain (${spec})`);
      }
    }
  }
});

t.test('services never touch Fastify or the environment; models never call services', async (t) => {
  for (const file of domainFiles.filter((f) => f.endsWith('service.ts'))) {
    const text = readFileSync(path.join(packageRoot, file), 'utf8');
    t.notOk(importsOf(file).some((s) => s.startsWith('fastify') || s.startsWith('@fastify') || s.endsWith('core/http.js')), `${file} imports Fastify or the HTTP layer`);
    t.notOk(/process\.env/.test(text), `${file} reads process.env`);
    for (const spec of importsOf(file)) {
      if (/^\.\.\/[a-z-]+\/model\.js$/.test(spec)) t.fail(`${file} uses another domain's model (${spec}); call its service`);
    }
  }
  for (const file of domainFiles.filter((f) => f.endsWith('model.ts'))) {
    t.notOk(importsOf(file).some((s) => /service|outbox|fastify/.test(s)), `${file} imports a service, the outbox or Fastify`);
  }
});

t.test('CLI commands go through services: no Fastify, no models, no raw SQL', async (t) => {
  for (const file of sources('cli')) {
    const specs = importsOf(file);
    t.notOk(specs.some((s) => s.startsWith('fastify') || s.startsWith('@fastify') || s === 'knex' || s === 'pg'), `${file} imports Fastify, knex or pg`);
    t.notOk(specs.some((s) => s.endsWith('model.js')), `${file} imports a model`);
    const code = readFileSync(path.join(packageRoot, file), 'utf8').replace(/^\s*import\s[^;]*;/gms, '');
    t.notOk(/\.raw\(|\bselect\s[^'"`]+\sfrom\s/i.test(code), `${file} contains SQL`);
  }
});

t.test('only cli/io.ts writes to the console', async (t) => {
  for (const file of sources('cli').filter((f) => !f.endsWith('io.ts'))) {
    const text = readFileSync(path.join(packageRoot, file), 'utf8');
    t.notOk(/console\.|process\.(stdout|stderr)\.write/.test(text), `${file} writes output itself`);
  }
});

t.test('every domain with routes is registered in server/app.ts', async (t) => {
  const app = readFileSync(path.join(packageRoot, 'server/app.ts'), 'utf8');
  for (const file of domainFiles.filter((f) => f.endsWith('routes.ts'))) {
    t.match(app, `./domains/${domainOf(file)}/routes.js`, `${domainOf(file)} is in the explicit domain list`);
  }
});

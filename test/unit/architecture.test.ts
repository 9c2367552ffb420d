/**
 * Keeps the shape of docs/design.md true by reading the source:
 * - layers: the kernel imports no domain, a leaf imports only the kernel and its own domain,
 *   flows compose leaves, routes sit on top; no import cycle anywhere in server/ and cli/;
 * - no module-level mutable state in server/ (it lives on the Services a process builds);
 * - the tenant condition of hand-written SQL comes from core's helper, never typed out;
 * - routes never touch knex or models, CLI commands never Fastify or SQL.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { packageRoot } from '../../server/core/paths.js';

function sources(dir: string): string[] {
  return (readdirSync(path.join(packageRoot, dir), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f).split(path.sep).join('/'))
    .sort();
}

const read = (file: string) => readFileSync(path.join(packageRoot, file), 'utf8');

/** Every module a file names: imports (type-only ones too: they tie files together as well), re-exports, import(). */
function specifiersOf(file: string): string[] {
  const text = read(file);
  const found = [
    ...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/gms),
    ...text.matchAll(/^\s*import\s+'([^']+)'/gm),
    ...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
  ];
  return found.map((m) => m[1]!);
}

/** The repository file a relative specifier names ('./x.js' -> 'dir/x.ts'), or null for packages. */
function resolve(from: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec)).replace(/\.js$/, '.ts');
  return existsSync(path.join(packageRoot, target)) ? target : null;
}

const files = [...sources('server'), ...sources('cli')];
const graph = new Map(
  files.map((f) => [
    f,
    specifiersOf(f)
      .map((s) => resolve(f, s))
      .filter((x): x is string => x !== null),
  ]),
);

type Layer = 'kernel' | 'integration' | 'leaf' | 'flow' | 'routes' | 'worker' | 'runtime' | 'cli';

/**
 * The top-level folders of server/ are the layers, lowest first: a file imports only from its own
 * folder or one listed before it (http/ and worker/ share a rank: neither imports the other).
 * server/*.ts (app, main, the services' wiring) sit on top.
 */
const FOLDER_RANK: Readonly<Record<string, number>> = { core: 0, integrations: 1, domains: 2, flows: 3, http: 4, worker: 4 };
const TOP_RANK = 5;

/** A server file's top-level folder under server/ ('' for server/*.ts). */
const folderOf = (file: string) => (file.split('/').length > 2 ? file.split('/')[1]! : '');
const rankOf = (file: string) => FOLDER_RANK[folderOf(file)] ?? TOP_RANK;

/** Which layer a file is in; see docs/decisions for why the outbox's enqueue side is kernel. */
function layerOf(file: string): Layer {
  if (file.startsWith('cli/')) return 'cli';
  const layers: Readonly<Record<string, Layer>> = { core: 'kernel', integrations: 'integration', domains: 'leaf', flows: 'flow', http: 'routes', worker: 'worker' };
  return layers[folderOf(file)] ?? 'runtime';
}

const domainOf = (file: string) => (file.startsWith('server/domains/') ? file.split('/')[2]! : null);
const isSchemas = (file: string) => file.endsWith('schemas.ts');

/** Why `from` may not import `to`, or null when it may. */
function violation(from: string, to: string): string | null {
  const [a, b] = [layerOf(from), layerOf(to)];
  if (a === 'cli') return null;
  if (b === 'cli') return 'the server never imports the CLI';
  if (folderOf(from) !== folderOf(to) && rankOf(to) >= rankOf(from))
    return `server/${folderOf(from) || '*.ts'} never imports from server/${folderOf(to) || '*.ts'}, above or beside it`;
  if (a !== 'leaf' || b !== 'leaf' || domainOf(to) === domainOf(from)) return null;
  // The wire shapes of one domain may embed another's (a ticket view embeds a contact): schemas only.
  return isSchemas(from) && isSchemas(to) ? null : 'a leaf imports only the kernel, the integrations and its own domain';
}

/** Strongly connected components with more than one file (Tarjan): each one is an import cycle. */
function cycles(edges: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

t.test('the checks see the code they check', async (t) => {
  t.ok(graph.size > 100, 'server/ and cli/ files are read');
  t.ok(files.filter((f) => layerOf(f) === 'leaf').length > 20, 'leaves are found');
  t.ok(files.filter((f) => layerOf(f) === 'flow').length > 5, 'flows are found');
  t.ok(graph.get('server/app.ts')!.includes('server/http/tickets.ts'), 'relative imports resolve to files');
  t.same(
    cycles(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', ['a']],
        ['d', ['a']],
      ]),
    ),
    [['a', 'b', 'c']],
    'a cycle is found',
  );
  t.equal(violation('server/domains/tickets/service.ts', 'server/domains/contacts/service.ts'), 'a leaf imports only the kernel, the integrations and its own domain');
  t.match(violation('server/domains/tickets/service.ts', 'server/flows/ticket-merge.ts'), /never imports from server\/flows/, 'an import up a folder is found');
  t.match(violation('server/core/services.ts', 'server/integrations/mail.ts'), /never imports from server\/integrations/, 'the kernel never imports an integration');
  t.match(violation('server/http/tickets.ts', 'server/worker/dispatcher.ts'), /beside it/, 'http and worker never import each other');
});

t.test('no import cycle among server/ and cli/ files', async (t) => {
  t.same(cycles(graph), [], 'every import points one way');
});

t.test('each layer imports only what is below it', async (t) => {
  const broken: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const why = violation(from, to);
      if (why) broken.push(`${from} -> ${to}: ${why}`);
    }
  }
  t.same(broken, []);
});

t.test('no module-level mutable state in server/', async (t) => {
  // ids.ts keeps the last timestamp so ids stay monotonic within a millisecond: a property of the
  // process's clock, the same for every Services in it.
  const allowed = new Set(['server/core/ids.ts']);
  const found: string[] = [];
  for (const file of sources('server').filter((f) => !allowed.has(f))) {
    read(file)
      .split('\n')
      .forEach((line, i) => {
        if (/^(export\s+)?(let|var)\s/.test(line)) found.push(`${file}:${i + 1} ${line.trim()}`);
        // A constant lookup table is declared read-only; anything else is a cache that belongs on Services.
        if (/^(export\s+)?const\s+\w+[^=]*=\s*new\s+(Weak)?(Map|Set)\b/.test(line) && !/^[^=]*:\s*Readonly/.test(line)) found.push(`${file}:${i + 1} ${line.trim()}`);
      });
  }
  t.same(found, []);
});

t.test('hand-written SQL gets its tenant condition from core/model.ts, never typed out', async (t) => {
  const found: string[] = [];
  for (const file of sources('server').filter((f) => !f.startsWith('server/core/'))) {
    read(file)
      .split('\n')
      .forEach((line, i) => {
        if (/\b(account_id|livemode)\s*=(?!=)/.test(line)) found.push(`${file}:${i + 1} ${line.trim()}`);
        // The same condition in knex's object form: { accountId: ctx.accountId, … } is scopeOf(ctx).
        if (/accountId: (ctx|tx)\.accountId, livemode/.test(line)) found.push(`${file}:${i + 1} ${line.trim()}`);
      });
  }
  t.same(found, []);
});

t.test('routes never touch knex, objection or models', async (t) => {
  for (const file of files.filter((f) => layerOf(f) === 'routes')) {
    for (const spec of specifiersOf(file)) {
      t.notOk(['knex', 'objection', 'pg'].includes(spec), `${file} imports ${spec}`);
      t.notOk(spec.endsWith('model.js'), `${file} imports a model (${spec})`);
    }
  }
});

t.test('services and flows never touch Fastify or the environment; models never call services', async (t) => {
  for (const file of files.filter((f) => layerOf(f) === 'leaf' || layerOf(f) === 'flow')) {
    t.notOk(
      specifiersOf(file).some((s) => s.startsWith('fastify') || s.startsWith('@fastify') || s.endsWith('core/http.js')),
      `${file} imports Fastify or the HTTP layer`,
    );
    t.notOk(/process\.env/.test(read(file)), `${file} reads process.env`);
  }
  for (const file of files.filter((f) => f.endsWith('/model.ts'))) {
    t.notOk(
      specifiersOf(file).some((s) => /service|outbox|fastify|flows/.test(s)),
      `${file} imports a service, a flow, the outbox or Fastify`,
    );
  }
});

t.test('CLI commands go through services: no Fastify, no models, no raw SQL', async (t) => {
  for (const file of sources('cli')) {
    const specs = specifiersOf(file);
    t.notOk(
      specs.some((s) => s.startsWith('fastify') || s.startsWith('@fastify') || s === 'knex' || s === 'pg'),
      `${file} imports Fastify, knex or pg`,
    );
    t.notOk(
      specs.some((s) => s.endsWith('model.js')),
      `${file} imports a model`,
    );
    const code = read(file).replace(/^\s*import\s[^;]*;/gms, '');
    t.notOk(/\.raw\(|\bselect\s[^'"`]+\sfrom\s/i.test(code), `${file} contains SQL`);
  }
});

t.test('only cli/io.ts writes to the console', async (t) => {
  for (const file of sources('cli').filter((f) => !f.endsWith('io.ts'))) {
    t.notOk(/console\.|process\.(stdout|stderr)\.write/.test(read(file)), `${file} writes output itself`);
  }
});

t.test('every routes file in server/http/ is registered in server/app.ts', async (t) => {
  const app = read('server/app.ts');
  for (const file of files.filter((f) => layerOf(f) === 'routes')) {
    t.match(app, `./http/${path.posix.basename(file, '.ts')}.js`, `${file} is in the explicit list`);
  }
});

t.test('a routes file calls the services of one domain at most: more than one is a flow', async (t) => {
  for (const file of files.filter((f) => layerOf(f) === 'routes')) {
    const domains = new Set(
      graph
        .get(file)!
        .filter((to) => layerOf(to) === 'leaf' && !isSchemas(to))
        .map(domainOf),
    );
    t.ok(domains.size <= 1, `${file} calls ${[...domains].join(', ')}`);
  }
});

t.test('migrations are self-contained: they import packages and node built-ins only', async (t) => {
  const migrations = readdirSync(path.join(packageRoot, 'migrations')).filter((f) => f.endsWith('.ts'));
  t.ok(migrations.length > 10, 'migrations are read');
  for (const file of migrations) {
    const relative = specifiersOf(`migrations/${file}`).filter((s) => s.startsWith('.'));
    t.same(relative, [], `migrations/${file} imports no project file`);
  }
});

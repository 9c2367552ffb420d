import { Liquid, type FS } from 'liquidjs';
import type { Services } from '../../core/services.js';
import { part } from '../../core/services.js';

/**
 * Templates of notes, mails and macro comments: Liquid (liquidjs), the placeholder language
 * Zendesk users know ({{ticket.title}}, {{customer.name}}, {{brand.name}}, {{assignee.name}},
 * {{ticket.customFields.plan}}). Sandboxed: no file is ever read (include, render and layout find
 * nothing), only own properties of the data given are visible, and parsing, rendering time and
 * memory are bounded; the output is cut at MAX_OUTPUT characters.
 */

export const MAX_OUTPUT = 50_000;
const NO_FILES: FS = {
  exists: async () => false,
  existsSync: () => false,
  readFile: async (file: string) => {
    throw new Error(`templates read no files (${file})`);
  },
  readFileSync: (file: string) => {
    throw new Error(`templates read no files (${file})`);
  },
  resolve: (_dir: string, file: string) => file,
};

const engine = part(
  'rules.liquid',
  () =>
    new Liquid({
      fs: NO_FILES,
      relativeReference: false,
      dynamicPartials: false,
      ownPropertyOnly: true,
      strictFilters: true,
      cache: 500,
      parseLimit: 40_000,
      renderLimit: 1_000,
      memoryLimit: 4_000_000,
    }),
);

/** Why a template cannot be used (a Liquid syntax error, an unknown filter), or null. */
export function templateProblem(services: Services, template: string): string | null {
  try {
    services.get(engine).parse(template);
    return null;
  } catch (err) {
    return (err as Error).message.split('\n')[0]!.slice(0, 300);
  }
}

/** What a template sees. */
export interface TemplateData {
  ticket: Record<string, unknown>;
  customer: { name: string | null; email: string | null } | null;
  brand: { id: string; name: string };
  assignee: { id: string; name: string | null; email: string } | null;
  comment?: { body: string; authorName: string | null; isInternal: boolean } | null;
}

/** The text of a template, or (when it fails while rendering: over its limits) the template itself, unrendered. */
export async function render(services: Services, template: string, data: TemplateData): Promise<string> {
  try {
    const out = String(await services.get(engine).parseAndRender(template, data as unknown as Record<string, unknown>));
    return out.length > MAX_OUTPUT ? out.slice(0, MAX_OUTPUT) : out;
  } catch {
    return template.slice(0, MAX_OUTPUT);
  }
}

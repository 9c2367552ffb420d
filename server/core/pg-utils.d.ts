// The part of pg's own helpers (CommonJS, untyped) that inlines a statement's values.
declare module 'pg/lib/utils.js' {
  /** A value as pg sends it as a parameter: text, or null (arrays as array literals, objects as JSON). */
  export function prepareValue(value: unknown): string | Buffer | null;
}

/**
 * What an image file is, judged by its first bytes (its signature), never by its name or the type
 * a client declares: the four raster formats an avatar may be. Anything else (SVG, HTML, a PDF, a
 * text file named .png) is none of them.
 */

export const AVATAR_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'] as const;
export type AvatarType = (typeof AVATAR_TYPES)[number];

/** How many leading bytes imageTypeOf needs. */
export const SIGNATURE_BYTES = 12;

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export function imageTypeOf(head: Buffer): AvatarType | null {
  const ascii = (from: number, to: number) => head.subarray(from, to).toString('latin1');
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (head.length >= 8 && head.subarray(0, 8).equals(PNG)) return 'image/png';
  if (ascii(0, 6) === 'GIF87a' || ascii(0, 6) === 'GIF89a') return 'image/gif';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  return null;
}

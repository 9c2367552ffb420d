import t from 'tap';
import { imageTypeOf } from '../../server/domains/profiles/images.js';

// What an avatar is, by its first bytes alone.

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

t.test('the four image formats are known by their signatures', async (t) => {
  t.equal(imageTypeOf(bytes([0xff, 0xd8, 0xff, 0xe0], 'JFIF')), 'image/jpeg');
  t.equal(imageTypeOf(bytes([0x89], 'PNG\r\n\x1a\n', [0, 0, 0, 13])), 'image/png');
  t.equal(imageTypeOf(bytes('GIF87a', [1, 0])), 'image/gif');
  t.equal(imageTypeOf(bytes('GIF89a', [1, 0])), 'image/gif');
  t.equal(imageTypeOf(bytes('RIFF', [0x1a, 0, 0, 0], 'WEBPVP8L')), 'image/webp');
});

t.test('anything else is none of them, whatever it resembles', async (t) => {
  for (const [label, head] of [
    ['empty', bytes()],
    ['SVG', bytes('<svg xmlns="http://www.w3.org/2000/svg">')],
    ['HTML', bytes('<!doctype html><script>')],
    ['PDF', bytes('%PDF-1.7\n')],
    ['a RIFF that is a WAV', bytes('RIFF', [0, 0, 0, 0], 'WAVEfmt ')],
    ['a PNG signature cut short', bytes([0x89], 'PNG\r\n')],
    ['two JPEG bytes', bytes([0xff, 0xd8])],
    ['GIF90a', bytes('GIF90a')],
    ['a BMP', bytes('BM', [0, 0, 0, 0])],
  ] as const) {
    t.equal(imageTypeOf(head), null, label);
  }
});

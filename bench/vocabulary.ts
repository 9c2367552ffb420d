/**
 * Words for the bench's tickets, most frequent first. Drawn with a Zipf-like law (the word of rank r
 * with probability about 1/(r ln V)), so a few words are in most tickets and most words in a few:
 * search has common words, rare words and prefixes to look for. Some are accented, so the accent
 * folding is on the measured path too.
 */
const COMMON = `the to and order please my account help refund not payment issue with password login email shipping
delivery invoice cancel subscription error update card charge received package return customer support product price
billing address change problem app website access reset account number tracking week late damaged missing item
question request urgent thanks hello team phone service plan upgrade downgrade discount coupon code store checkout
cart mobile android iphone browser crash slow page loading export import report data sync calendar notification
settings profile photo upload download file attachment link share team admin permission role user invite`.split(/\s+/);

const ACCENTED = [
  'café',
  'résumé',
  'naïve',
  'déjà',
  'façade',
  'Zoë',
  'Müller',
  'straße',
  'señor',
  'año',
  'crème',
  'fiancé',
  'über',
  'garçon',
  'smörgåsbord',
  'Ångström',
  'piñata',
  'jalapeño',
  'São',
  'Kraków',
  'élève',
  'Ærø',
  'Øresund',
  'Đà',
  'Łódź',
  'çà',
];

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'tor', 'ven', 'qua', 'zel', 'pri', 'dos', 'ru', 'fa', 'gil', 'bar', 'sin', 'tek', 'ol', 'ux', 'ham', 'wer', 'jo', 'cy'];

/** V words: the common ones, the accented ones from rank 60 on, then made-up words (stable order). */
export function vocabulary(size = 20_000): string[] {
  const words = [...COMMON.slice(0, 60), ...ACCENTED, ...COMMON.slice(60)];
  const seen = new Set(words.map((w) => w.toLowerCase()));
  for (let i = 0; words.length < size; i++) {
    let n = i;
    let w = '';
    do {
      w += SYLLABLES[n % SYLLABLES.length];
      n = Math.floor(n / SYLLABLES.length);
    } while (n > 0);
    w += ['', 's', 'er', 'ing', 'ed', 'ly'][i % 6];
    if (!seen.has(w)) {
      seen.add(w);
      words.push(w);
    }
  }
  return words;
}

export const FIRST_NAMES = [
  'Ann',
  'José',
  'Zoë',
  'François',
  'Björn',
  'Chloé',
  'Mia',
  'Liam',
  'Noah',
  'Emma',
  'Olivia',
  'Lucas',
  'Sofía',
  'Mateo',
  'Ingrid',
  'Łukasz',
  'Søren',
  'Aoife',
  'Kenji',
  'Priya',
  'Omar',
  'Fatima',
  'Hélène',
  'Jürgen',
  'Agnès',
  'Dmitri',
  'Yusuf',
  'Elena',
  'Ravi',
  'Grace',
];
export const LAST_NAMES = [
  'Lee',
  'García',
  'Müller',
  'Dubois',
  'Andersson',
  'Rossi',
  'Nowak',
  'Smith',
  'Brown',
  'Novák',
  'Ødegaard',
  'Tanaka',
  'Khan',
  'Silva',
  'Öztürk',
  'Jensen',
  'Martín',
  'Kowalski',
  'Nguyen',
  'Okafor',
  'Petrović',
  'Hernández',
  'Lefèvre',
  'Schäfer',
  'Ó Briain',
  'Park',
];

import { randomBytes } from 'node:crypto';
import t from 'tap';
import { systemCtx, withTx } from '../../server/core/context.js';
import { createServices } from '../../server/compose.js';
import { replyTokenKey } from '../../server/domains/mail/service.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase } from '../helpers/db.js';
import { testNow } from '../helpers/clock.js';

/**
 * The key that signs reply addresses (domains/mail/service.ts replyTokenKey): one per database,
 * read in the caller's transaction and kept by each process once it is a committed row.
 */

const { db } = await freshDatabase(t);
/** A process of its own: services of their own on the one database. */
const aProcess = () => systemCtx(createServices({ clock: testNow, config: testConfig({}), db }));
const storedKey = async (): Promise<Buffer | null> => {
  const row = (await db('server_secrets').where({ name: 'mail_reply_token_key' }).first('value')) as { value: string } | undefined;
  return row ? Buffer.from(row.value, 'base64') : null;
};

t.test('made in a transaction that rolls back: not kept, and the next read makes the key that stays', async (t) => {
  const ctx = aProcess();
  let madeInRolledBack: Buffer | null = null;
  await t.rejects(
    withTx(ctx, async (tx) => {
      madeInRolledBack = await replyTokenKey(tx);
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  t.equal(await storedKey(), null, 'the rollback took the key away');
  const key = await replyTokenKey(ctx);
  t.same(key, await storedKey(), 'the key used is the stored one');
  t.notSame(key, madeInRolledBack, 'not the rolled-back one');
  t.same(await replyTokenKey(ctx), key, 'and stays');
});

t.test('every process reads the same key, and each keeps the one it read', async (t) => {
  const first = aProcess();
  const key = await replyTokenKey(first);
  const second = aProcess();
  t.same(await replyTokenKey(second), key, 'another process: the same key');
  await db('server_secrets')
    .where({ name: 'mail_reply_token_key' })
    .update({ value: randomBytes(32).toString('base64') });
  t.same(await replyTokenKey(second), key, 'kept: not read again');
  t.notSame(await replyTokenKey(aProcess()), key, 'a process started after the change reads the row');
});

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface ProvisionResult {
  databaseUrl: string;
  role: string;
  database: string;
  createdRole: boolean;
  createdDatabase: boolean;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * On an existing PostgreSQL (connected as an administrator): the login role and database ticketd
 * will use, owned by that role. An existing role gets a new password only when asked.
 */
export async function provisionDatabase(adminUrl: string, options: { role: string; database: string; resetPassword?: boolean }): Promise<ProvisionResult> {
  for (const name of [options.role, options.database]) {
    if (!IDENTIFIER.test(name)) throw new Error(`"${name}" is not a plain identifier (lower-case letters, digits, underscores)`);
  }
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const {
      rows: [version],
    } = await client.query(`SELECT current_setting('server_version_num')::int AS n`);
    if (version.n < 150000) throw new Error('ticketd needs PostgreSQL 15 or newer');
    const password = randomBytes(24).toString('base64url');
    const roleExists = (await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [options.role])).rowCount! > 0;
    if (roleExists && !options.resetPassword) {
      throw new Error(`Role "${options.role}" already exists; pass --reset-password to give it a new password, or choose another --role-name`);
    }
    // Identifiers were checked above; the password is base64url, so quoting it is safe.
    await client.query(`${roleExists ? 'ALTER' : 'CREATE'} ROLE ${options.role} LOGIN PASSWORD '${password}'`);
    const dbExists = (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [options.database])).rowCount! > 0;
    if (!dbExists) await client.query(`CREATE DATABASE ${options.database} OWNER ${options.role} ENCODING 'UTF8' TEMPLATE template0`);
    const url = new URL(adminUrl);
    url.username = options.role;
    url.password = password;
    url.pathname = `/${options.database}`;
    return { databaseUrl: url.toString(), role: options.role, database: options.database, createdRole: !roleExists, createdDatabase: !dbExists };
  } finally {
    await client.end();
  }
}

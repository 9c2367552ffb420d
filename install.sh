#!/usr/bin/env bash
# Installs ticketd from its lockfile and builds it. Unprivileged and idempotent: run it again at will.
# Needs Node.js >= 20.18.1 and npm; downloads nothing but npm packages.
set -euo pipefail
cd "$(dirname "$0")"

required="20.18.1"
if ! command -v node >/dev/null 2>&1; then
  echo "install.sh: Node.js ${required} or newer is required, and 'node' is not on PATH." >&2
  exit 1
fi
if ! node -e "
  const [a, b, c] = process.versions.node.split('.').map(Number);
  const [x, y, z] = '${required}'.split('.').map(Number);
  process.exit(a > x || (a === x && (b > y || (b === y && c >= z))) ? 0 : 1);
"; then
  echo "install.sh: Node.js ${required} or newer is required; this is $(node --version). Install a newer Node.js and run ./install.sh again." >&2
  exit 1
fi

# Reinstall only when the lockfile changed since the last install.
stamp="node_modules/.ticketd-lockfile.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install.sh: installing dependencies from package-lock.json"
  # package.json's allowScripts approves the embedded PostgreSQL package's postinstall script.
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi

echo "install.sh: building"
npm run build:if-stale --silent # nothing to do when dist is newer than every source

# The embedded PostgreSQL binaries must run (their package restores library symlinks on install).
if ! node --input-type=module -e "
  const { execFileSync } = await import('node:child_process');
  const { postgres } = await import('@embedded-postgres/' + process.platform + '-' + process.arch);
  execFileSync(postgres, ['--version'], { stdio: 'ignore' });
" 2>/dev/null; then
  echo "install.sh: warning: the embedded PostgreSQL binaries do not run on this machine; set DATABASE_URL to an external PostgreSQL >= 15." >&2
fi
echo "install.sh: done. Start with: bin/ticketd start"

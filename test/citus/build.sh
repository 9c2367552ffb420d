#!/usr/bin/env bash
# Builds Citus from a source checkout and installs it into the machine's PostgreSQL 15.
# Needs root (apt-get and make install). Usage: test/citus/build.sh <citus-source-dir>
# The source is Citus v13.2.2 (its newest release for PostgreSQL 15), kept outside the repository.
set -euo pipefail

src=${1:?usage: build.sh <citus-source-dir>}
pg_config=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential autoconf flex bison \
  postgresql-server-dev-15 libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev \
  libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev >/dev/null

cd "$src"
# Debian's PostgreSQL 15.20 exports have_createdb_privilege, which Citus 13.2.2 also defines
# as a static inline for PostgreSQL 15: keep Citus's copy for older minor versions only.
compat=src/include/pg_version_compat.h
if ! grep -q 'PG_VERSION_NUM < 150020' "$compat"; then
  perl -0pi -e 's/(static inline bool\nhave_createdb_privilege\(void\)\n\{.*?\n\}\n)/#if PG_VERSION_NUM < 150020\n$1#endif\n/s' "$compat"
  grep -q 'PG_VERSION_NUM < 150020' "$compat" || { echo "build.sh: could not patch $compat" >&2; exit 1; }
fi

[ -f Makefile.global ] || PG_CONFIG=$pg_config ./configure --quiet
make -s -j"$(nproc)"
make -s install
echo "citus $(sed -n 's/^default_version = .\(.*\).$/\1/p' src/backend/distributed/citus.control) installed into $($pg_config --pkglibdir)"

#!/usr/bin/env bash
# Installs PostgreSQL and MariaDB from Debian's packages when they are missing,
# for the test fixtures that start throwaway servers, and chromium with its
# WebDriver for the console's browser tests (tests/server/test_console.py). Needs root and apt-get;
# elsewhere it says what is missing and the server tests skip (or fail, with
# TESSERA_REQUIRE_SERVERS=1).
set -euo pipefail

have_postgres() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
have_mariadb() { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ]; }
# PostGIS for the SS-DB benchmark's PostgreSQL peer (spatial indexes, as the paper's MySQL)
have_postgis() { compgen -G "/usr/share/postgresql/*/extension/postgis.control" >/dev/null; }
have_chromium() { command -v chromium >/dev/null; }
have_chromedriver() { command -v chromedriver >/dev/null; }

missing=()
have_postgres || missing+=(postgresql)
have_mariadb || missing+=(mariadb-server)
have_postgis || missing+=(postgresql-15-postgis-3)
have_chromium || missing+=(chromium)
have_chromedriver || missing+=(chromium-driver)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "install-servers: missing ${missing[*]}; run as root with apt-get to install them" >&2
  exit 0
fi
echo "install-servers: installing ${missing[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The packages try to start their services; policy-rc.d may refuse, which is fine:
# the fixtures start their own throwaway servers.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

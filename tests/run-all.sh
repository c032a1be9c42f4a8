#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs all of it.
# This is README command 2 and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)           # dashboard tests (Selenium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'

# Two workers (pytest-xdist): most tests wait on brokers, etcd, Spark or a browser, so two
# at a time fit the CI's 2 cores. A test file stays on one worker (--dist loadfile): its
# module-scoped brokers and its tests' order are as when run alone. STRATA_TEST_WORKERS=0
# runs everything in this one process.
workers="${STRATA_TEST_WORKERS:-2}"
xdist=()
[ "$workers" = "0" ] || xdist=(-n "$workers" --dist loadfile)

set +e
python3 -m pytest "${xdist[@]}" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "run-all: pytest collected no tests; treating as failure" >&2
  exit 1
fi
exit "$rc"

#!/usr/bin/env bash
# The test suite on any Debian or Ubuntu machine: installs what the tests
# talk to when it is missing — redis-server and redis-tools (a real Redis
# and a 3-master cluster), PostgreSQL (the ledger), Chromium (the finance
# page), promtool (the alert rules) and curl, from the distribution's
# packages — starts PostgreSQL, then runs go test -race ./... and the Helm
# chart's tests (extra arguments go to go test). --deps-only stops after
# the set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
# need CMD PACKAGE installs PACKAGE when CMD is missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: $1 is missing and this is not a Debian-like machine: install $2 and run again" >&2
    exit 1
  fi
  echo "== installing $2"
  if [ -z "${apt_updated:-}" ]; then $sudo apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}
need curl curl
need redis-server redis-server
need redis-cli redis-tools
need promtool prometheus
need chromium chromium

# PostgreSQL for the ledger tests: the machine's own server on 127.0.0.1:5432
# (TOLLGATE_TEST_POSTGRES points elsewhere), installed and started if absent.
if [ -z "${TOLLGATE_TEST_POSTGRES:-}" ] && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  need pg_ctlcluster postgresql
  cluster=$(ls /etc/postgresql)
  $sudo pg_ctlcluster --skip-systemctl-redirect "$cluster" main start || true
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  # Tests connect as postgres over TCP without a password, as on the
  # machines CI runs on; a fresh install wants one, so trust loopback.
  hba=$(ls /etc/postgresql/*/main/pg_hba.conf)
  if ! grep -q '^host all postgres 127.0.0.1/32 trust' "$hba"; then
    $sudo sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
    $sudo pg_ctlcluster --skip-systemctl-redirect "$cluster" main reload
  fi
  pg_isready -h 127.0.0.1 -p 5432
fi


if [ "${1:-}" = "--deps-only" ]; then exit 0; fi
go test -race "$@" ./...
# The Helm chart, rendered by Helm's engine: a module of its own, so the
# chart's Kubernetes dependencies stay out of the gateway's.
(cd deploy/helm/charttest && go test "$@" ./...)

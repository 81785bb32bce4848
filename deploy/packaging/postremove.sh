#!/bin/sh
# Forgets the removed units. The state and textfile are left for purge (deb) or
# the administrator: node_exporter would otherwise keep exporting a stale file,
# which the RDMADoctorStale alert names.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload || true
fi

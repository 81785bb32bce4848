#!/bin/sh
# After removal: systemd forgets the units. On purge (deb) or erase (rpm: $1 is
# 0) the files the service wrote go too: the state, its lock, and the textfile,
# which node_exporter would otherwise go on exporting. A plain `dpkg -r` keeps
# them, as it keeps configuration.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload || true
fi
case "$1" in
  purge | 0)
    rm -f /var/lib/rdmadoctor/state.json /var/lib/rdmadoctor/state.json.lock \
      /var/lib/node_exporter/textfile_collector/rdmadoctor.prom
    rmdir /var/lib/rdmadoctor 2>/dev/null || true
    rmdir /var/lib/node_exporter/textfile_collector /var/lib/node_exporter 2>/dev/null || true
    ;;
esac

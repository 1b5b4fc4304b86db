# Shared helpers of the peer scripts (sourced, not run). State, logs and PID files live under
# $PEERS_STATE (default: target/peers/ of this repository, which git ignores).
PEERS_STATE=${PEERS_STATE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/peers}
mkdir -p "$PEERS_STATE"

die() { echo "error: $*" >&2; exit 1; }

# apt_ensure PKG...: installs the missing Debian packages. apt must never start their services
# (we run each server ourselves, on loopback): a policy-rc.d that says no is put in place for
# the install when the system has none.
apt_ensure() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}); install them or run as root"
  local pol=/usr/sbin/policy-rc.d made=
  if [ ! -e $pol ]; then printf '#!/bin/sh\nexit 101\n' > $pol; chmod +x $pol; made=1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  local rc=$?
  [ -n "$made" ] && rm -f $pol
  return $rc
}

port_open() { (: > "/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# wait_port PORT SECONDS PIDFILE: waits until PORT accepts on 127.0.0.1 while the process lives.
wait_port() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    port_open "$1" && return 0
    pid_alive "$3" || return 1
    sleep 0.1
  done
  return 1
}

# stop_pid PIDFILE [SECONDS]: SIGTERM, waits, SIGKILL if still alive; removes the PID file.
# Only the process named in the PID file is touched.
stop_pid() {
  if ! pid_alive "$1"; then rm -f "$1"; return 0; fi
  local pid i
  pid=$(cat "$1")
  kill -TERM "$pid"
  for ((i = 0; i < ${2:-30} * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$1"
  echo "stopped $pid"
}

# show_status PIDFILE NAME: prints the PID and the resident memory of the process and its children.
show_status() {
  pid_alive "$1" || { echo "$2: not running"; return 1; }
  local pid kb
  pid=$(cat "$1")
  kb=$(ps -o rss= --pid "$pid" --ppid "$pid" | awk '{s += $1} END {print s}')
  echo "$2: pid $pid, rss $((kb / 1024)) MiB"
}

# busy_check PORT...: refuses to start when a port is already taken by someone else.
busy_check() {
  local p
  for p in "$@"; do port_open "$p" && die "port $p on 127.0.0.1 is already in use"; done
  return 0
}

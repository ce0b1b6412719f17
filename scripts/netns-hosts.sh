#!/bin/sh
# Simulated cluster hosts on one machine, for running MPI jobs across "hosts" over real TCP:
# each host is a Linux network namespace with two networks, as many clusters have:
#   management  10.231.ID.0/24  mpirun <-> the Open MPI daemons (launch, output, MPI_Abort)
#   data        10.232.ID.0/24  the MPI traffic between ranks (btl tcp)
# Both are bridges inside a "switch" namespace (so this machine's own firewall and addresses
# stay out of it); the machine itself joins the management network as 10.231.ID.254, the
# address mpirun listens on. Host i is namespace og<ID>h<i> with management address
# 10.231.ID.i (its name for mpirun --host) on interface mgmt0 and data address 10.232.ID.i on
# interface data0; netns-rsh.sh starts its processes under the host name og<ID>h<i>. Taking a host's data0 down cuts its MPI traffic while mpirun still reaches
# its daemon, so the ranks' own failure (the communication timeout) is what ends the job.
#
#   netns-hosts.sh check            exit 0 if namespaces can be made here, else 77 and why
#   netns-hosts.sh up ID N          make hosts 1..N of set ID (1..250); replaces a stale set
#   netns-hosts.sh down ID          remove set ID (idempotent: nothing there is fine)
#   netns-hosts.sh link ID I up|down  take host I's data link up or down (a cable pulled)
#   netns-hosts.sh hosts ID N [S]   print "10.231.ID.1:S,...,10.231.ID.N:S" (mpirun --host;
#                                   S ranks per host, default 1)
#   netns-hosts.sh mpirun ID N [S]  print the mpirun flags that launch S ranks per host over
#                                   TCP only (see netns-rsh.sh for the agent)
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`.
set -eu

usage() {
  grep '^#   netns-hosts.sh' "$0" | sed 's/^#  //' >&2
  exit 2
}

# check: whether this process may make network namespaces (a probe, removed at once).
check() {
  if ! command -v ip > /dev/null 2>&1; then
    echo "no 'ip' command (Debian package iproute2)"
    return 77
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "not root: network namespaces need CAP_NET_ADMIN"
    return 77
  fi
  probe="ogprobe$$"
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace (no CAP_NET_ADMIN or CAP_SYS_ADMIN?): $err"
    return 77
  fi
  ok=0
  if ! err=$(ip netns exec "$probe" true 2>&1); then
    echo "cannot enter a network namespace (no CAP_SYS_ADMIN?): $err"
    ok=77
  elif ! err=$(ip netns exec "$probe" unshare --uts true 2>&1); then
    echo "cannot give a host its own host name (unshare --uts, util-linux): $err"
    ok=77
  elif ! err=$(ip link add "${probe}a" type veth peer name "${probe}b" netns "$probe" 2>&1); then
    echo "cannot create a veth pair (no CAP_NET_ADMIN, or no veth module?): $err"
    ok=77
  fi
  ip link del "${probe}a" 2> /dev/null || true
  ip netns del "$probe" 2> /dev/null || true
  return $ok
}

valid_id() {
  case "$1" in '' | *[!0-9]*) echo "netns-hosts.sh: ID must be a number 1..250, got '$1'" >&2; exit 2 ;; esac
  if [ "$1" -lt 1 ] || [ "$1" -gt 250 ]; then
    echo "netns-hosts.sh: ID must be 1..250 (it is an address octet), got $1" >&2
    exit 2
  fi
}

valid_n() {
  case "$1" in '' | *[!0-9]*) echo "netns-hosts.sh: N must be a number 1..200, got '$1'" >&2; exit 2 ;; esac
  if [ "$1" -lt 1 ] || [ "$1" -gt 200 ]; then
    echo "netns-hosts.sh: N must be 1..200, got $1" >&2
    exit 2
  fi
}

# down: every namespace of set ID (hosts and switch) and the machine's end of the management
# link. Deleting a namespace deletes the interfaces in it, and with them their veth peers.
down() {
  id=$1
  for ns in $(ip netns list | awk '{print $1}'); do
    case "$ns" in "og${id}h"[0-9]* | "og${id}sw") ;; *) continue ;; esac
    # A process still running in a host would keep its namespace alive unseen: end it.
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
  ip link del "og${id}m" 2> /dev/null || true
}

# Waits until every port of set ID's bridges (or only PORT) forwards: at once with STP off,
# the default, but a veth's carrier comes up a moment after both of its ends are up.
wait_forwarding() {
  sw="og${1}sw"
  tries=0
  while bridge -n "$sw" link show ${2:+dev "$2"} | grep -qv 'state forwarding'; do
    tries=$((tries + 1))
    if [ "$tries" -ge 50 ]; then
      echo "netns-hosts.sh: bridge ports of $sw not forwarding after 5 s:" >&2
      bridge -n "$sw" link show >&2
      exit 1
    fi
    sleep 0.1
  done
}

# link: the data link of host I, taken down or up from the host's side.
link() {
  id=$1 i=$2 state=$3
  ip -n "og${id}h${i}" link set data0 "$state"
  [ "$state" = down ] || wait_forwarding "$id" "data${i}"
}

up() {
  id=$1 n=$2
  down "$id"
  # The machine's own networks come first: refuse a set whose subnets it already routes.
  for net in 231 232; do
    if taken=$(ip -4 route show match "10.${net}.${id}.1" | grep -v '^default') && [ -n "$taken" ]; then
      echo "netns-hosts.sh: this machine already routes 10.${net}.${id}.0/24 ($taken); choose another ID" >&2
      exit 2
    fi
  done
  # A failure or a signal half-way leaves nothing behind.
  trap 'down "$id"' EXIT
  trap 'exit 1' INT TERM HUP
  sw="og${id}sw"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br-mgmt type bridge
  ip -n "$sw" link add br-data type bridge
  ip -n "$sw" link set br-mgmt up
  ip -n "$sw" link set br-data up
  # The machine's own port on the management network.
  ip link add "og${id}m" type veth peer name root netns "$sw"
  ip -n "$sw" link set root master br-mgmt up
  ip addr add "10.231.${id}.254/24" dev "og${id}m"
  ip link set "og${id}m" up
  i=1
  while [ "$i" -le "$n" ]; do
    h="og${id}h${i}"
    ip netns add "$h"
    ip -n "$h" link set lo up
    for net in mgmt data; do
      ip -n "$sw" link add "${net}${i}" type veth peer name "${net}0" netns "$h"
      ip -n "$sw" link set "${net}${i}" master "br-${net}" up
      ip -n "$h" link set "${net}0" up
    done
    ip -n "$h" addr add "10.231.${id}.${i}/24" dev mgmt0
    ip -n "$h" addr add "10.232.${id}.${i}/24" dev data0
    i=$((i + 1))
  done
  wait_forwarding "$id"
  trap - EXIT INT TERM HUP
}

hosts() {
  id=$1 n=$2 slots=$3 i=1 list=""
  while [ "$i" -le "$n" ]; do
    list="${list:+$list,}10.231.${id}.${i}:${slots}"
    i=$((i + 1))
  done
  echo "$list"
}

# The flags: S slots per host, the rsh agent that enters the namespace, daemons launched
# straight from mpirun (no tree spawn: a daemon would need the agent on its host), and TCP
# only: btl tcp,self (no shared memory between the namespaces, which share /dev/shm) with
# the MPI traffic on the data network and the daemons' on the management network.
mpirun_flags() {
  id=$1 n=$2 slots=$3
  here=$(cd "$(dirname "$0")" && pwd)
  echo "--host $(hosts "$id" "$n" "$slots") --mca plm_rsh_agent $here/netns-rsh.sh --mca plm_rsh_no_tree_spawn 1" \
       "--mca btl tcp,self --mca btl_tcp_if_include 10.232.${id}.0/24" \
       "--mca oob_tcp_if_include 10.231.${id}.0/24"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  check) [ $# -eq 0 ] || usage; check ;;
  up) [ $# -eq 2 ] || usage; valid_id "$1"; valid_n "$2"; why=$(check) || { echo "netns-hosts.sh: $why" >&2; exit 77; }; up "$1" "$2" ;;
  down) [ $# -eq 1 ] || usage; valid_id "$1"; down "$1" ;;
  link)
    [ $# -eq 3 ] || usage
    valid_id "$1"
    valid_n "$2"
    case "$3" in up | down) ;; *) usage ;; esac
    link "$1" "$2" "$3"
    ;;
  hosts | mpirun)
    [ $# -eq 2 ] || [ $# -eq 3 ] || usage
    valid_id "$1"
    valid_n "$2"
    slots=${3:-1}
    valid_n "$slots"
    if [ "$cmd" = hosts ]; then hosts "$1" "$2" "$slots"; else mpirun_flags "$1" "$2" "$slots"; fi
    ;;
  *) usage ;;
esac

#!/bin/sh
# Open MPI's rsh agent for the hosts of scripts/netns-hosts.sh: where ssh would log in to
# HOST and run COMMAND, this runs COMMAND in HOST's network namespace under HOST's own host
# name (host 10.231.ID.I is namespace and host name ogIDhI; nothing else is searched, so
# other sets being made or removed meanwhile do not matter).
#   netns-rsh.sh [SSH-OPTIONS...] HOST COMMAND...
# mpirun calls it as `agent HOST orted ...` (--mca plm_rsh_agent); like ssh it hands the
# words of COMMAND to a shell joined by spaces (Open MPI quotes them for that).
set -eu
while [ $# -gt 0 ]; do
  case "$1" in -*) shift ;; *) break ;; esac  # ssh options (e.g. -x): nothing to do here
done
if [ $# -lt 2 ]; then
  echo "usage: netns-rsh.sh HOST COMMAND..." >&2
  exit 2
fi
host=$1
shift
ns=$(echo "$host" | sed -n 's/^10\.231\.\([0-9]\{1,3\}\)\.\([0-9]\{1,3\}\)$/og\1h\2/p')
if [ -z "$ns" ]; then
  echo "netns-rsh.sh: '$host' is not a host of netns-hosts.sh (10.231.ID.I)" >&2
  exit 255
fi
if ! ip -n "$ns" -4 -o addr show dev mgmt0 2> /dev/null | grep -q " inet $host/"; then
  echo "netns-rsh.sh: namespace $ns does not hold $host (scripts/netns-hosts.sh up?)" >&2
  exit 255
fi
# Its own host name too (a UTS namespace), as a real host has: Open MPI names its session
# directory /tmp/ompi.HOSTNAME.UID, and daemons sharing one raced to create it ("mkdir ...
# File exists", the daemon never called back and mpirun waited for ever).
exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $ns && $*"

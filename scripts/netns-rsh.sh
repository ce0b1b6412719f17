#!/bin/sh
# Open MPI's rsh agent for the hosts of scripts/netns-hosts.sh: where ssh would log in to
# HOST and run COMMAND, this runs COMMAND in the network namespace that holds HOST's address.
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
for ns in $(ip netns list | awk '{print $1}'); do
  if ip -n "$ns" -4 -o addr show 2> /dev/null | grep -q " inet $host/"; then
    exec ip netns exec "$ns" /bin/sh -c "$*"
  fi
done
echo "netns-rsh.sh: no network namespace holds address $host (scripts/netns-hosts.sh up?)" >&2
exit 255

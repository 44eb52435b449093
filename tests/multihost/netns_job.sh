#!/usr/bin/env bash
# Runs a thd job across two "hosts": two network namespaces this script creates,
# joined by a veth pair (10.77.<n>.1 and 10.77.<n>.2), so every rank has its own
# host's address and traffic between the hosts crosses a real (virtual) link.
# Nothing outside the namespaces is used. Exit 77 (ctest: skipped) when this
# machine does not allow `ip netns` (no root, no CAP_NET_ADMIN, no iproute2).
#
#   netns_job.sh BACKEND PROGRAM [ARGS...]
#
# Ranks 0 and 1 run on host A (rank 0 hosts the store), ranks 2 and 3 on host B.
# Every rank gets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, THD_BIND_HOST (its host's
# address), THD_BACKEND and a token in THD_AUTH_TOKEN. The namespaces and every
# rank are removed on every way out.
set -uo pipefail

backend="${1:?usage: netns_job.sh BACKEND PROGRAM [ARGS...]}"
shift
program="${1:?usage: netns_job.sh BACKEND PROGRAM [ARGS...]}"
shift

world=4
tag="thd$$"
ns_a="${tag}a"
ns_b="${tag}b"
# A subnet per run: concurrent tests never share addresses.
net="10.77.$(( $$ % 250 + 1 ))"
addr_a="${net}.1"
addr_b="${net}.2"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v ip >/dev/null 2>&1 || ! ip netns add "$ns_a" 2>/dev/null; then
  echo "netns_job: skipped: this machine does not allow network namespaces (ip netns add failed; needs root/CAP_NET_ADMIN)"
  exit 77
fi
set -e
ip netns add "$ns_b"
ip link add "${tag}va" type veth peer name "${tag}vb"
ip link set "${tag}va" netns "$ns_a"
ip link set "${tag}vb" netns "$ns_b"
ip -n "$ns_a" addr add "${addr_a}/24" dev "${tag}va"
ip -n "$ns_b" addr add "${addr_b}/24" dev "${tag}vb"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set "${tag}va" up
ip -n "$ns_b" link set "${tag}vb" up
set +e

port=$(( 20000 + $$ % 20000 ))
token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
for rank in $(seq 0 $((world - 1))); do
  if (( rank < 2 )); then ns="$ns_a"; host="$addr_a"; else ns="$ns_b"; host="$addr_b"; fi
  ip netns exec "$ns" env RANK="$rank" WORLD_SIZE="$world" MASTER_ADDR="$addr_a" MASTER_PORT="$port" \
    THD_BIND_HOST="$host" THD_BACKEND="$backend" THD_AUTH_TOKEN="$token" UCX_TLS="${UCX_TLS:-tcp,self}" \
    FI_PROVIDER="${FI_PROVIDER:-tcp}" "$program" "$@" > >(sed "s/^/[rank $rank] /") 2>&1 &
  pids+=("$!")
done

status=0
deadline=$((SECONDS + ${THD_NETNS_TIMEOUT:-120}))
for i in "${!pids[@]}"; do
  while kill -0 "${pids[$i]}" 2>/dev/null; do
    if (( SECONDS > deadline )); then
      echo "netns_job: rank $i still running after ${THD_NETNS_TIMEOUT:-120} s"
      exit 1
    fi
    sleep 0.1
  done
  wait "${pids[$i]}"
  code=$?
  if (( code != 0 )); then
    echo "netns_job: rank $i exited with $code"
    status=1
  fi
done
exit "$status"

#!/usr/bin/env bash
# A real cluster on loopback for `make test-cluster`: a 3-node NATS JetStream cluster
# (nats-server built from the nats-server/v2 version in go.mod, the one the fleet embeds)
# and a Redis Cluster of 3 masters and 3 replicas (redis-server from Debian's packages,
# installed if missing). Data and logs live under CLUSTER_DIR.
#
#   scripts/cluster.sh up            start everything, wait until both clusters serve
#   scripts/cluster.sh down          stop everything, remove CLUSTER_DIR
#   scripts/cluster.sh env           print the variables the tests read
#   scripts/cluster.sh start-nats I  (re)start NATS node I (0-2) on its store
#   scripts/cluster.sh start-redis P (re)start the Redis node on port P on its data
#
# Ports (loopback only): NATS clients 14222-14224, routes 16222-16224, monitoring
# 18222-18224; Redis 17000-17005 (cluster bus 27000-27005). Override the bases with
# CLUSTER_NATS_PORT and CLUSTER_REDIS_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${CLUSTER_DIR:-${TMPDIR:-/tmp}/searchfleet-cluster}
nats_port=${CLUSTER_NATS_PORT:-14222}
route_port=$((nats_port + 2000))
mon_port=$((nats_port + 4000))
redis_port=${CLUSTER_REDIS_PORT:-17000}

log() { printf 'cluster: %s\n' "$*" >&2; }

wait_for() { # wait_for SECONDS WHAT CMD...
  local secs=$1 what=$2; shift 2
  for _ in $(seq $((secs * 10))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "timed out waiting for $what"; return 1
}

build_nats() {
  local want have
  want=$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
  have=$(cat "$dir/bin/nats-server.version" 2>/dev/null || true)
  if [ -x "$dir/bin/nats-server" ] && [ "$have" = "$want" ]; then return; fi
  log "building nats-server $want"
  mkdir -p "$dir/bin"
  go build -o "$dir/bin/nats-server" github.com/nats-io/nats-server/v2
  echo "$want" > "$dir/bin/nats-server.version"
}

need_redis() {
  if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then return; fi
  log "installing redis-server from Debian's packages"
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
}

start_nats() { # start_nats I
  local i=$1 routes="" j
  for j in 0 1 2; do routes="$routes nats://127.0.0.1:$((route_port + j))"; done
  mkdir -p "$dir/nats/n$i"
  cat > "$dir/nats/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:$((nats_port + i))
http: 127.0.0.1:$((mon_port + i))
jetstream {
  store_dir: "$dir/nats/n$i"
}
cluster {
  name: searchfleet
  listen: 127.0.0.1:$((route_port + i))
  routes: [$(echo $routes | sed 's/ /, /g')]
}
CONF
  "$dir/bin/nats-server" -c "$dir/nats/n$i.conf" >>"$dir/nats/n$i.log" 2>&1 &
  echo $! > "$dir/nats/n$i.pid"
}

start_redis() { # start_redis PORT
  local p=$1
  mkdir -p "$dir/redis/$p"
  redis-server --port "$p" --bind 127.0.0.1 --daemonize yes \
    --cluster-enabled yes --cluster-config-file "$dir/redis/$p/nodes.conf" --cluster-node-timeout 2000 \
    --dir "$dir/redis/$p" --appendonly yes --appendfsync everysec --save "" \
    --pidfile "$dir/redis/$p.pid" --logfile "$dir/redis/$p.log"
}

redis_ports() { for i in 0 1 2 3 4 5; do echo $((redis_port + i)); done; }

cluster_ok() {
  local p
  for p in $(redis_ports); do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || return 1
  done
}

nats_ok() {
  local i
  for i in 0 1 2; do
    curl -sf "http://127.0.0.1:$((mon_port + i))/healthz?js-enabled-only=true" >/dev/null || return 1
  done
  # A meta leader is elected once any node reports one.
  curl -sf "http://127.0.0.1:$mon_port/jsz" | grep -q '"leader"'
}

print_env() {
  local urls="" addrs="" i p
  for i in 0 1 2; do urls="${urls:+$urls,}nats://127.0.0.1:$((nats_port + i))"; done
  for p in $(redis_ports); do addrs="${addrs:+$addrs,}127.0.0.1:$p"; done
  echo "FLEET_TEST_NATS_URL=$urls"
  echo "REDIS_URL=redis+cluster://$addrs"
  echo "FLEET_TEST_CLUSTER_DIR=$dir"
}

up() {
  if [ -d "$dir/nats" ] || [ -d "$dir/redis" ]; then
    log "$dir is in use: run '$0 down' first"; exit 1
  fi
  command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl >/dev/null; }
  need_redis
  build_nats
  mkdir -p "$dir/nats" "$dir/redis"
  log "starting 3 nats-server nodes (ports $nats_port-$((nats_port + 2)))"
  for i in 0 1 2; do start_nats $i; done
  log "starting 6 redis-server nodes (ports $redis_port-$((redis_port + 5)))"
  local hosts=""
  for p in $(redis_ports); do start_redis "$p"; hosts="$hosts 127.0.0.1:$p"; done
  for p in $(redis_ports); do wait_for 10 "redis $p" redis-cli -p "$p" ping; done
  if ! cluster_ok; then
    redis-cli --cluster create $hosts --cluster-replicas 1 --cluster-yes >"$dir/redis/create.log" 2>&1 ||
      { cat "$dir/redis/create.log" >&2; exit 1; }
  fi
  wait_for 30 "the Redis Cluster" cluster_ok
  wait_for 30 "the NATS JetStream cluster" nats_ok
  sleep 1
  alive || exit 1
  print_env > "$dir/env"
  log "up; variables in $dir/env"
}

down() {
  local f p
  for f in "$dir"/nats/*.pid "$dir"/redis/*.pid; do
    [ -f "$f" ] || continue
    kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  # Also whatever a run that lost its pid files left behind on these ports.
  pkill -9 -f "$dir/bin/nats-server" 2>/dev/null || true
  for p in $(redis_ports); do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$dir"
  log "down"
}

# alive fails when a process the script started has exited (a port already taken).
alive() {
  local f
  for f in "$dir"/nats/*.pid "$dir"/redis/*.pid; do
    kill -0 "$(cat "$f")" 2>/dev/null || { log "$(basename "$f" .pid) exited: see ${f%.pid}.log"; return 1; }
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  start-nats) start_nats "$2" ;;
  start-redis) start_redis "$2" ;;
  *) echo "usage: $0 up|down|env|start-nats I|start-redis PORT" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# A production install serves: a copy of this checkout's tracked files is installed without dev dependencies
# (`npm ci --omit=dev`), and its `npx gate402 facilitator` and `npx gate402 gateway` are started, with fresh keys and a
# networks file, against a devnet started from the full checkout. Their answers are checked for content; everything
# started here is stopped by its process id and the temporary directory is removed.
#
# Usage: .ci/production-install.sh            (from anywhere; .ci/run calls it after `npm test`)
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gate402-production-install.XXXXXX")"
APP="$WORK/app"
PIDS=()
started=$SECONDS

log() { printf 'production-install: %s\n' "$*"; }
cleanup() {
  local status=$?
  # Each part runs in a process group of its own (setsid): its id is the group's, so npx and the node it runs stop together.
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $(basename "$f")"; tail -n 40 "$f"; }; done
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The copy: tracked files only, installed as an operator would.
log "copying the tracked files to $APP"
mkdir -p "$APP"
(cd "$REPO" && git ls-files -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$APP"
log "npm ci --omit=dev"
(cd "$APP" && npm ci --omit=dev --no-audit --no-fund --loglevel=error) > "$WORK/npm-ci.log" 2>&1
if [ -d "$APP/node_modules/@uniswap" ] || [ -d "$APP/node_modules/solc" ] || [ -d "$APP/node_modules/tap" ]; then
  log "the install holds dev dependencies: it proves nothing"; exit 1
fi

# 2. Free ports (three chains, the facilitator, the gateway), asked of the kernel.
free_ports() {
  node -e '
    const net = require("node:net");
    Promise.all([0, 1, 2, 3, 4].map(() => new Promise((ok) => { const s = net.createServer().listen(0, "127.0.0.1", () => ok(s)); })))
      .then((servers) => { console.log(servers.map((s) => s.address().port).join(" ")); servers.forEach((s) => s.close()); });'
}

# 3. A devnet from the full checkout (it needs the dev dependencies: solc artifacts, Uniswap's npm artifacts). A port
#    can be taken between asking and binding, and a loaded machine can stall a deployment: up to three tries.
for attempt in 1 2 3; do
  read -r P1 P2 P3 FAC_PORT GW_PORT < <(free_ports)
  log "devnet on ports $P1,$P2,$P3 (try $attempt)"
  setsid node "$REPO/src/cli/bin.mjs" devnet --manifest "$WORK/devnet.json" --ports "$P1,$P2,$P3" --fresh --exit-after 600 > "$WORK/devnet.log" 2>&1 &
  DEVNET_PID=$!
  PIDS+=("$DEVNET_PID")
  for _ in $(seq 900); do grep -qs '^ready in' "$WORK/devnet.log" && break; kill -0 "$DEVNET_PID" 2>/dev/null || break; sleep 0.1; done
  grep -qs '^ready in' "$WORK/devnet.log" && break
  log "the devnet did not start: $(head -c 300 "$WORK/devnet.log")"
  kill -TERM -- "-$DEVNET_PID" 2>/dev/null || true
  [ "$attempt" -lt 3 ] || exit 1
done

# 4. What an operator writes: the networks file (the devnet's chains, stock listing included) and fresh keys, given gas.
cd "$APP"
eval "$(node "$APP/.ci/production-setup.mjs" "$WORK/devnet.json" "$WORK/networks.json")"
MPP_SECRET="$(node -e 'console.log(require("node:crypto").randomBytes(32).toString("hex"))')"

# The native coins' USD prices, which the price floor needs off the devnet: these chains are the devnet's, whose ether
# is worth nothing, so it is counted at 1 USD as the devnet counts it (an operator of Base sets ether's price).
export GATE402_NATIVE_USD_EIP155_8453=1 GATE402_NATIVE_USD_EIP155_84532=1 GATE402_NATIVE_USD_EIP155_4663=1

# 5. Both parts from the copy, exactly as docs/operations-and-cluster.md's "Deploying" starts them.
log "npx gate402 facilitator on $FAC_PORT, npx gate402 gateway on $GW_PORT"
GATE402_NETWORKS_FILE="$WORK/networks.json" GATE402_RELAYER_KEYS="$FACILITATOR_RELAYER_KEY" GATE402_DATA_DIR="$WORK/facilitator-data" \
GATE402_FACILITATOR_PORT="$FAC_PORT" \
  setsid npx gate402 facilitator --exit-after 300 > "$WORK/facilitator.log" 2>&1 &
FAC_PID=$!
PIDS+=("$FAC_PID")
GATE402_NETWORKS_FILE="$WORK/networks.json" GATE402_RELAYER_KEYS="$GATEWAY_RELAYER_KEY" GATE402_DATA_DIR="$WORK/gateway-data" \
GATE402_GATEWAY_KEY="$GATEWAY_KEY" GATE402_MPP_SECRET="$MPP_SECRET" GATE402_STOCK_DESK_KEY="$DESK_KEY" \
GATE402_GATEWAY_PORT="$GW_PORT" GATE402_PUBLIC_URL="http://127.0.0.1:$GW_PORT" \
  setsid npx gate402 gateway --exit-after 300 > "$WORK/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
for _ in $(seq 900); do
  grep -qs '^facilitator: ' "$WORK/facilitator.log" && grep -qs '^gateway: ' "$WORK/gateway.log" && break
  for pid in "$FAC_PID" "$GW_PID"; do kill -0 "$pid" 2>/dev/null || { log "a part exited before it served"; exit 1; }; done
  sleep 0.1
done

# 6. Their answers, checked for what they say.
FAC="http://127.0.0.1:$FAC_PORT" GW="http://127.0.0.1:$GW_PORT" RELAYER_ADDRESS="$RELAYER_ADDRESS" RECEIPT_SIGNER="$RECEIPT_SIGNER" \
NETWORKS_FILE="$WORK/networks.json" node "$APP/.ci/production-checks.mjs"
grep -q '"stock desk ready"' "$WORK/gateway.log" || { log "the gateway did not log its stock desk"; exit 1; }
log "green in $((SECONDS - started)) s"

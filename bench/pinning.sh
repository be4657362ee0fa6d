#!/usr/bin/env bash
# bench/pinning.sh - which CPU-pinning design costs the agent less CPU per request:
#
#   A  one agent process pinned to CPUs 0-(N-1), GOMAXPROCS N (the design Phalanx uses)
#   B  N agent processes, each pinned to one CPU, GOMAXPROCS 1 ("one pinned worker
#      process per CPU")
#
# Both drive the same HTTPS target (coordctl target, 127.0.0.1 only) with the same plan
# (keep-alive, BENCH_CONNS connections, a fixed rate BENCH_PIN_RATE, BENCH_SECONDS
# each), in interleaved rounds A B A B ..., each through its own coordinator. Per
# round: achieved req/s and the agents' CPU (utime+stime from /proc/PID/stat, summed
# over B's processes) per completed request. Prints one line per round and the
# medians; writes them to bench-results/pinning-STAMP.md.
#
# Env: BENCH_ROUNDS (3)  BENCH_SECONDS (10)  BENCH_CONNS (50)  BENCH_PIN_RATE (8000)
#      BENCH_PIN_CPUS (all CPUs, as a list "0-1")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${BENCH_ROUNDS:-3}; SECS=${BENCH_SECONDS:-10}; CONNS=${BENCH_CONNS:-50}
RATE=${BENCH_PIN_RATE:-8000}; NCPU=$(nproc)
CPUS=${BENCH_PIN_CPUS:-0-$((NCPU - 1))}
[ "$NCPU" -ge 2 ] || { echo "pinning: needs 2 CPUs or more" >&2; exit 1; }
for v in ROUNDS SECS CONNS RATE; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "pinning: $v=${!v}: want a positive integer" >&2; exit 1; }
done
mapfile -t LIST < <(python3 -c "
import sys
out=[]
for part in sys.argv[1].split(','):
    a,_,b=part.partition('-'); out+=range(int(a),int(b or a)+1)
print('\n'.join(map(str,out)))" "$CPUS")

go build -o "$ROOT/bin/" ./cmd/agent ./cmd/coordinator ./cmd/coordctl
B=$ROOT/bin
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
CLK=$(getconf CLK_TCK)

TPORT=$(port)
"$B/coordctl" target --addr "127.0.0.1:$TPORT" --ca-out "$TMP/ca.pem" > "$TMP/target.log" 2>&1 & PIDS+=($!)
URL=https://127.0.0.1:$TPORT/

start_cluster() {   # start_cluster NAME CPUSET...: a coordinator and one agent per CPU set
    local name=$1; shift
    local cg cgo pids=()
    cg=127.0.0.1:$(port); cgo=127.0.0.1:$(port)
    "$B/coordinator" --grpc-addr "$cg" --gossip-addr "$cgo" --local --log-level warn > "$TMP/$name-co.log" 2>&1 & PIDS+=($!)
    for set in "$@"; do
        "$B/agent" --cpus "$set" --grpc-addr "127.0.0.1:$(port)" --gossip-addr "127.0.0.1:$(port)" \
            --join "$cgo" --local --log-level warn >> "$TMP/$name-agents.log" 2>&1 & PIDS+=($!); pids+=($!)
    done
    eval "${name}_COORD=$cg; ${name}_PIDS=\"${pids[*]}\"; ${name}_N=$#"
}
start_cluster A "$CPUS"
start_cluster B "${LIST[@]}"
for name in A B; do
    co=${name}_COORD; n=${name}_N
    for _ in $(seq 100); do
        live=$("$B/coordctl" --coordinator "${!co}" agents 2>/dev/null | awk 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "STATE") c = i; next} c && $c == "idle"' | wc -l)
        [ "$live" = "${!n}" ] && break; sleep 0.2
    done
    [ "$live" = "${!n}" ] || { echo "pinning: cluster $name: $live of ${!n} agents idle" >&2; exit 1; }
done

STAMP=$(date +%Y%m%d-%H%M%S); mkdir -p bench-results; OUT=bench-results/pinning-$STAMP.md
rows=()
for r in $(seq "$ROUNDS"); do
    for name in A B; do
        co=${name}_COORD; pv=${name}_PIDS
        t0=0; for p in ${!pv}; do t0=$((t0 + $(ticks "$p"))); done
        timeout $((SECS + 60)) "$B/coordctl" --coordinator "${!co}" run -c "$CONNS" -R "$RATE" -d "${SECS}s" \
            --cacert "$TMP/ca.pem" --json "$TMP/$name-$r.json" "$URL" > "$TMP/$name-$r.out" 2>&1
        t1=0; for p in ${!pv}; do t1=$((t1 + $(ticks "$p"))); done
        read -r n rps missed < <(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['requests'], j['rps'], j.get('missed',0))" "$TMP/$name-$r.json")
        us=$(awk -v a="$t0" -v b="$t1" -v t="$CLK" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / t * 1e6 / n}')
        rows+=("$name $r $rps $us $missed")
        echo "round $r  $name: $rps req/s, agent CPU $us us/req, missed $missed" >&2
        sleep 1
    done
done
{
    echo "# bench/pinning.sh ($STAMP)"
    echo
    echo "- $NCPU CPUs; target: coordctl target (unpinned); $CONNS keep-alive connections at $RATE req/s, $ROUNDS rounds of ${SECS}s, interleaved"
    echo "- A: one agent --cpus $CPUS (GOMAXPROCS ${#LIST[@]}); B: ${#LIST[@]} agents, --cpus ${LIST[*]} one each (GOMAXPROCS 1)"
    echo
    echo "| design | median req/s | median agent CPU µs/req | rounds (µs/req) |"
    echo "|---|--:|--:|---|"
    for name in A B; do
        printf '%s\n' "${rows[@]}" | awk -v d="$name" '$1 == d {r[++n] = $3; u[n] = $4; all = all " " $4}
            function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x } return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
            END {printf "| %s | %.0f | %.1f |%s |\n", d, med(r, n), med(u, n), all}'
    done
} > "$OUT"
cat "$OUT"

#!/usr/bin/env bash
# bench/skew.sh - start skew of two agents pinned to separate CPUs (issue 16's
# "start instants without a tail" row): a coordinator and two agents (--cpus 0 and
# --cpus 1, each GOMAXPROCS 1, real-time start waits when the process may: root or
# CAP_SYS_NICE) against the built-in HTTPS target on 127.0.0.1, BENCH_SKEW_RUNS runs
# of the same short plan, one after another. Per run: the result's start_skew_us
# (the spread of the agents' first sends, in the coordinator's clock) and each
# agent's start_offset_us (its first send after the start instant), and for a
# staged plan each later stage's change_skew_us (the spread of the agents' first
# sends scheduled in it, open loop, or of their first connections it activated,
# closed loop; e.g. BENCH_SKEW_FLAGS="bench/skew-closed-stages.yaml"). Prints one
# line per run and the largest; writes them to bench-results/skew-STAMP.md.
#
# Env: BENCH_SKEW_RUNS (6)  BENCH_SKEW_FLAGS ("-c 8 -R 2000 -d 2s": coordctl run
#      flags)  BENCH_SKEW_CPUS ("0 1": one agent per CPU)  BENCH_SKEW_LOAD (0: with 1,
#      a busy loop shares each agent's CPU during the runs, bounded by the run)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${BENCH_SKEW_RUNS:-6}
read -r -a FLAGS <<< "${BENCH_SKEW_FLAGS:--c 8 -R 2000 -d 2s}"
read -r -a CPUS <<< "${BENCH_SKEW_CPUS:-0 1}"
LOAD=${BENCH_SKEW_LOAD:-0}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "skew: BENCH_SKEW_RUNS=$RUNS: want a positive integer" >&2; exit 1; }
[ "${#CPUS[@]}" -ge 2 ] || { echo "skew: BENCH_SKEW_CPUS=${CPUS[*]}: want two CPUs or more" >&2; exit 1; }

go build -o "$ROOT/bin/" ./cmd/agent ./cmd/coordinator ./cmd/coordctl
B=$ROOT/bin
TMP=$(mktemp -d)
PIDS=()
cleanup() { [ -n "${BENCH_SKEW_KEEP:-}" ] && cp "$TMP"/*.log "$BENCH_SKEW_KEEP"/ 2>/dev/null; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

TPORT=$(port)
"$B/coordctl" target --addr "127.0.0.1:$TPORT" --ca-out "$TMP/ca.pem" > "$TMP/target.log" 2>&1 & PIDS+=($!)
URL=https://127.0.0.1:$TPORT/
CG=127.0.0.1:$(port); CGO=127.0.0.1:$(port)
"$B/coordinator" --grpc-addr "$CG" --gossip-addr "$CGO" --local --data-dir '' --log-level warn > "$TMP/co.log" 2>&1 & PIDS+=($!)
for c in "${CPUS[@]}"; do
    "$B/agent" --cpus "$c" --name "agent-cpu$c" --grpc-addr "127.0.0.1:$(port)" --gossip-addr "127.0.0.1:$(port)" \
        --join "$CGO" --local --log-level warn >> "$TMP/agents.log" 2>&1 & PIDS+=($!)
done
for _ in $(seq 100); do
    live=$("$B/coordctl" --coordinator "$CG" agents 2>/dev/null |
        awk 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "STATE") c = i} NR > 1 && c && $c == "idle"' | wc -l || true)
    [ "$live" = "${#CPUS[@]}" ] && break; sleep 0.2
done
[ "$live" = "${#CPUS[@]}" ] || { echo "skew: $live of ${#CPUS[@]} agents idle" >&2; exit 1; }
for _ in $(seq 50); do curl -sk -m 1 -o /dev/null "$URL" && break; sleep 0.1; done

STAMP=$(date +%Y%m%d-%H%M%S); mkdir -p bench-results; OUT=bench-results/skew-$STAMP.md
rows=()
for r in $(seq "$RUNS"); do
    busy=()
    if [ "$LOAD" = 1 ]; then
        for c in "${CPUS[@]}"; do
            timeout 20 taskset -c "$c" bash -c 'while :; do :; done' & busy+=($!)
        done
    fi
    rc=0
    timeout 120 "$B/coordctl" --coordinator "$CG" run "${FLAGS[@]}" --cacert "$TMP/ca.pem" \
        --json "$TMP/$r.json" "$URL" > "$TMP/$r.out" 2>&1 || rc=$?
    for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ "$rc" = 0 ] || { echo "skew: run $r failed (rc $rc): $(tail -n 3 "$TMP/$r.out")" >&2; exit 1; }
    line=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
offs = " ".join("%s %.1f" % (a["name"], a.get("start_offset_us", float("nan"))) for a in j.get("agents", []))
changes = [st["change_skew_us"] for st in j.get("stages") or [] if st.get("index", 0) > 0 and st.get("change_skew_us")]
print("%.1f\t%s\t%s\t%s" % (j["start_skew_us"], "unknown" if j.get("start_skew_unknown") else "-", offs,
    " ".join("%.1f" % c for c in changes) or "-"))' "$TMP/$r.json")
    rows+=("$r"$'\t'"$line")
    echo "run $r: start skew $(cut -f1 <<< "$line") us; start offsets (us): $(cut -f3 <<< "$line"); stage change skews (us): $(cut -f4 <<< "$line")" >&2
    sleep 1
done
{
    echo "# bench/skew.sh ($STAMP)"
    echo
    echo "- $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); phalanx $(git describe --always --dirty 2>/dev/null || echo '?')"
    echo "- agents: --cpus ${CPUS[*]} (one each); real-time start waits: $(grep -o 'realtime_start=[a-z]*' "$TMP/agents.log" | sort | uniq -c | tr '\n' ' ' || true); target: coordctl target (unpinned); plan: ${FLAGS[*]}; busy loop on the agents' CPUs: $([ "$LOAD" = 1 ] && echo yes || echo no)"
    echo
    echo "| run | start skew µs | agents' start offsets µs | stage change skews µs |"
    echo "|--:|--:|---|--:|"
    printf '%s\n' "${rows[@]}" | awk -F'\t' '{printf "| %s | %s%s | %s | %s |\n", $1, $2, ($3 == "unknown" ? " (unknown)" : ""), $4, $5}'
    echo
    printf '%s\n' "${rows[@]}" | awk -F'\t' '{if ($2 + 0 > m) m = $2 + 0; n++; if ($2 + 0 >= 100) over++
        k = split($5, c, " "); for (i = 1; i <= k; i++) if (c[i] != "-") {cn++; if (c[i] + 0 > cm) cm = c[i] + 0; if (c[i] + 0 >= 100) cover++}}
        END {printf "Largest start skew %.1f µs over %d runs; %d run(s) at 100 µs or more.\n", m, n, over
             if (cn) printf "Largest stage change skew %.1f µs over %d stage changes; %d at 100 µs or more.\n", cm, cn, cover}'
} > "$OUT"
cat "$OUT"

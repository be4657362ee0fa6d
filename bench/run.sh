#!/usr/bin/env bash
# bench/run.sh - `make bench`: Phalanx's agent next to wrk / h2load / ab, side by
# side, on one machine, everything on 127.0.0.1.
#
# It installs what is missing (apt-get), builds ./bin/{agent,coordinator,coordctl},
# makes a throwaway CA and an ECDSA P-256 leaf, starts a private nginx (own prefix,
# pid file and logs under a temp dir; never the system nginx) with one worker on the
# LAST CPU, a coordinator and ONE agent on CPU 0, then runs every scenario as
# interleaved rounds (peer, phalanx, peer, phalanx, ...) with the client on CPU 0:
#
#   ka-h1          HTTP/1.1 keep-alive, 600-byte page        wrk     vs phalanx
#   ka-h1-16k      HTTP/1.1 keep-alive, 16 KiB page          wrk     vs phalanx
#   ka-h2          HTTP/2, 50 connections x 10 streams       h2load  vs phalanx --http2 -m10
#   short-full     1 request/connection, full handshakes     ab      vs phalanx --no-keepalive
#   short-resumed  1 request/connection, TLS 1.3 resumption  wrk     vs phalanx --no-keepalive --tls-resume
#   ka-h2-lighttpd as ka-h2, against lighttpd (a server faster than nginx on HTTP/2:
#                  the client's own speed shows), run from its Debian packages
#                  unpacked into the temp dir (apt-get download; never installed)
#
# each closed loop at 50 connections, then both at the same fixed rate (60 % of the
# peer's closed-loop median; the peer is h2load --rps where h2load can do the case,
# else "n/a"), and a memory table at 2,000 and 10,000 keep-alive connections (wrk vs
# agent, RSS per connection).
#
# Per run: achieved req/s; client CPU us per completed request (peer: /usr/bin/time
# user+sys of the peer process; phalanx: the long-lived agent's utime+stime delta
# from /proc/PID/stat around the run); peak RSS (peer: /usr/bin/time %M; agent:
# VmHWM after `echo 5 > /proc/PID/clear_refs`); the coordinator's CPU during the
# run as % of one core; the nginx worker's CPU % and its CPU us per request the tool
# completed (what the tool's traffic costs the server: ka-h2 compares our HTTP/2
# framing and HPACK with h2load's). The table (medians over rounds) goes to stdout and to
# bench-results/bench-STAMP.md; raw outputs and the per-run TSV to
# bench-results/bench-STAMP/. Everything started here is stopped on exit.
#
# Env: BENCH_ROUNDS (3)  BENCH_SECONDS (10)  BENCH_QUICK=1 (1 round of 3 s, smoke test)
#      BENCH_ONLY=<regex over scenario names>  BENCH_CONNS (50)  BENCH_MEM_CONNS ("2000 10000":
#      the memory table's connection counts; 0 or empty skips it)  BENCH_RATE_FRACTION (0.6)  BENCH_CLIENT_CPU (0)
#      BENCH_SERVER_CPU (last CPU)  BENCH_COORD_CPU (BENCH_SERVER_CPU): where the coordinator
#        and coordctl run (the agent always runs alone on BENCH_CLIENT_CPU)
#      BENCH_LATENESS_RATES ("200 2000 20000"; empty skips): the "lateness" rows
#        (selected by BENCH_ONLY like a scenario named lateness): h2load --rps and
#        phalanx -R at each rate on the 600-byte page, keep-alive HTTP/1.1 and HTTP/2
#        (-m10), both tools' CPU per request and phalanx's send lateness p50/p99 and
#        latency p50 - service time p50 (JSON); with the ka-h1/ka-h2 fixed-rate rows
#        (60 % of the closed-loop maximum) added when those ran.
#      BENCH_PACING_WINDOW (1ms; empty skips): each keep-alive fixed-rate row and each
#        lateness rate also runs phalanx -R with --pacing-window at this window (sends
#        bunched as h2load's 1-ms libev timer bunches them), compared with the same
#        rounds' h2load runs: rows "rate N/s, window W" and "-R N, window W".
#      BENCH_PACING_SPIN (1; 0 skips): each lateness rate also runs phalanx -R with
#        --pacing-spin (each send's timer wait ended early, then spun to its instant):
#        rows "-R N, spin".
#      BENCH_CPS_RATE (500; 0 skips): the "cps" rows (selected by BENCH_ONLY like a
#        scenario): new TLS connections/s, one request each, full handshakes: h2load
#        -r (its short-connection mode: a client per connection, one request each,
#        BENCH_CPS_RATE/100 every 10 ms; a multiple of 100) vs phalanx --cps; and phalanx --cps
#        --resume-ratio 0.7 beside the same h2load runs (h2load cannot resume across
#        connections); client and server CPU us per connection, as ratios.
#      BENCH_PROFILE=1: after each scenario's measured rounds, one more phalanx run per
#        mode (closed, rate, and ratew: the rate with the pacing window) with the agent's CPU profile (pprof over the run) and its
#        allocation profile; `go tool pprof -top` of each goes to bench-results/ and the
#        report. Profiled runs are not in the table (profiling costs CPU).
#      BENCH_RSS_REQUESTS=N: instead of the table, one keep-alive run of N requests
#        (-n N, BENCH_CONNS connections) with the agent's RSS sampled every
#        BENCH_RSS_EVERY (5) seconds: is memory flat as the request count grows?
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    ROUNDS=${BENCH_ROUNDS:-1}; SECS=${BENCH_SECONDS:-3}
else
    ROUNDS=${BENCH_ROUNDS:-3}; SECS=${BENCH_SECONDS:-10}
fi
ONLY=${BENCH_ONLY:-.}
PROFILE=${BENCH_PROFILE:-0}
RSS_REQUESTS=${BENCH_RSS_REQUESTS:-0}
RSS_EVERY=${BENCH_RSS_EVERY:-5}
CONNS=${BENCH_CONNS:-50}
MEM_CONNS=${BENCH_MEM_CONNS-2000 10000}; [ "$MEM_CONNS" = 0 ] && MEM_CONNS=""
MEM_SECS=${BENCH_MEM_SECONDS:-$([ "${BENCH_QUICK:-0}" = 1 ] && echo 5 || echo 10)}
RATE_FRACTION=${BENCH_RATE_FRACTION:-0.6}
LATENESS_RATES=${BENCH_LATENESS_RATES-200 2000 20000}
PACING_WINDOW=${BENCH_PACING_WINDOW-1ms}
PACING_SPIN=${BENCH_PACING_SPIN:-1}
CPS_RATE=${BENCH_CPS_RATE:-500}
NCPU=$(nproc)
CLIENT_CPU=${BENCH_CLIENT_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-$((NCPU - 1))}
# The coordinator and coordctl run off the agent's CPU, as in a deployed
# cluster (the agent alone on its client machine): on the agent's CPU they
# preempt it for up to a scheduler slice, which was most of its send
# lateness p99 (README, Performance).
COORD_CPU=${BENCH_COORD_CPU:-$SERVER_CPU}
H=127.0.0.1
RUN_CAP=$((SECS + 60))          # hard cap (s) for one tool / coordctl invocation

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS=$ROUNDS: want a positive integer"
[[ $SECS =~ ^[1-9][0-9]*$ ]] || die "BENCH_SECONDS=$SECS: want a positive integer"
[[ $RSS_REQUESTS =~ ^[0-9]+$ ]] || die "BENCH_RSS_REQUESTS=$RSS_REQUESTS: want a request count"
[[ $RSS_EVERY =~ ^[1-9][0-9]*$ ]] || die "BENCH_RSS_EVERY=$RSS_EVERY: want a positive number of seconds"
[ "$NCPU" -ge 2 ] || log "warning: only $NCPU CPU: client and nginx share it"
SCENARIOS=(ka-h1 ka-h1-16k ka-h2 short-full short-resumed ka-h2-lighttpd)   # defined in define() below
selected=()
for s in "${SCENARIOS[@]}"; do [[ $s =~ $ONLY ]] && selected+=("$s"); done
LATENESS=0; [[ lateness =~ $ONLY ]] && [ -n "$LATENESS_RATES" ] && LATENESS=1
CPS=0; [[ cps =~ $ONLY ]] && [ "$CPS_RATE" -gt 0 ] && CPS=1
[[ $CPS_RATE =~ ^[0-9]+$ ]] && [ $(( CPS_RATE % 100 )) = 0 ] || die "BENCH_CPS_RATE=$CPS_RATE: want connections/s, a multiple of 100 (h2load -r creates rate/100 every 10 ms; 0 skips the cps rows)"
for mc in $MEM_CONNS; do [[ $mc =~ ^[1-9][0-9]*$ ]] || die "BENCH_MEM_CONNS=$MEM_CONNS: want connection counts"; done
[ "${#selected[@]}" -gt 0 ] || [ -n "$MEM_CONNS" ] || [ "$LATENESS" = 1 ] || [ "$CPS" = 1 ] || die "BENCH_ONLY=$ONLY selects no scenario"

# --- 1. tools -------------------------------------------------------------------
# command -> Debian package
declare -A PKG=(
    [nginx]=nginx [wrk]=wrk [h2load]=nghttp2-client [ab]=apache2-utils [jq]=jq
    [openssl]=openssl [curl]=curl [taskset]=util-linux [/usr/bin/time]=time
    [ss]=iproute2 [timeout]=coreutils [cyclictest]=rt-tests
)
missing=()
for c in "${!PKG[@]}"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("${PKG[$c]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]} (run as root, or apt-get install them)"
    log "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || die "go not found in PATH"
NGINX_BIN=$(command -v nginx)

log "building ./bin/{agent,coordinator,coordctl}"
# The build's commit, taken now: the tree may change while the bench runs.
PHX_DESC=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')
go build -o "$ROOT/bin/" ./cmd/agent ./cmd/coordinator ./cmd/coordctl
AGENT_BIN=$ROOT/bin/agent; COORD_BIN=$ROOT/bin/coordinator; CTL_BIN=$ROOT/bin/coordctl
if [ "$LATENESS" = 1 ]; then
    # The lateness rows' "clock alone" floor: BenchmarkClockAlone (the
    # engine's test binary).
    go test -c -o "$ROOT/bin/engine.test" ./internal/engine
fi

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = 65536 ] || log "note: open files limited to $(ulimit -n) (hard limit $(ulimit -Hn))"
CLK_TCK=$(getconf CLK_TCK)

# --- state, cleanup -------------------------------------------------------------
TMP=$(mktemp -d /tmp/phalanx-bench.XXXXXX)
chmod 755 "$TMP"
STAMP=$(date +%Y%m%d-%H%M%S)
OUTDIR=$ROOT/bench-results
RES=$OUTDIR/bench-$STAMP
RAW=$RES/raw
REPORT=$OUTDIR/bench-$STAMP.md
mkdir -p "$RAW"
TSV=$RES/runs.tsv
printf 'scenario\tmode\trate\tround\tside\ttool\trps\tcompleted\tcpu_s\tus_per_req\trss_mb\tcoord_cpu_pct\terrors\trc\tnote\tserver_cpu_pct\ths_full\ths_resumed\tclient_bound\tmissed\tscheduled\terror_kinds\tserver_us_per_req\n' > "$TSV"

NGINX_PID_FILE=$TMP/nginx/nginx.pid
COORD_PID=""; AGENT_PID=""; CHILD=""; LT_PID=""

stop_pid() {   # stop_pid PID NAME: TERM, wait up to 5 s, then KILL (only our own children)
    local pid=$1 i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "$2 ($pid) did not stop: KILL"; kill -KILL "$pid" 2>/dev/null || true; }
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    set +e
    [ -n "$CHILD" ] && stop_pid "$CHILD" "current run"     # timeout(1) passes the TERM on
    [ -n "${RSS_SAMPLER:-}" ] && kill "$RSS_SAMPLER" 2>/dev/null
    stop_pid "$AGENT_PID" agent
    stop_pid "$COORD_PID" coordinator
    stop_pid "$LT_PID" lighttpd
    local pf
    for pf in "$NGINX_PID_FILE" "$TMP/nginx/mem.pid"; do   # the bench's nginx, the memory rows'
        [ -s "$pf" ] || continue
        local m; m=$(cat "$pf")
        # only our nginx: its command line names our prefix
        if [ -r "/proc/$m/cmdline" ] && tr '\0' ' ' < "/proc/$m/cmdline" | grep -qF -- "$TMP/nginx"; then
            kill -TERM "$m" 2>/dev/null
            for _ in $(seq 50); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$m" 2>/dev/null && kill -KILL "$m" 2>/dev/null
        fi
    done
    # keep the logs with the raw results
    for f in "$TMP"/coordinator.log "$TMP"/agent.log "$TMP"/nginx/logs/error.log "$TMP"/lighttpd/error.log; do
        [ -f "$f" ] && cp "$f" "$RES/" 2>/dev/null
    done
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# bounded OUT CMD...: run CMD (stdout+stderr to OUT) under timeout, in the background
# and wait for it, so that a signal to this script is handled at once.
bounded() {
    local out=$1 rc=0; shift
    timeout -k 5 "$RUN_CAP" "$@" > "$out" 2>&1 &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=""
    return "$rc"
}

# free TCP+UDP port on 127.0.0.1, not handed out before in this run
USED_PORTS=" "
free_port() {
    local p i
    for i in $(seq 200); do
        p=$((20000 + RANDOM % 30000))
        [[ $USED_PORTS == *" $p "* ]] && continue
        if [ -z "$(ss -Htuan "( sport = :$p )" 2>/dev/null)" ]; then
            USED_PORTS+="$p "; echo "$p"; return 0
        fi
    done
    die "no free port found"
}

# --- 2. certificates, content, nginx -----------------------------------------------
log "work dir $TMP; results $RES"
mkdir -p "$TMP/pki" "$TMP/nginx/html" "$TMP/nginx/logs" "$TMP/nginx/tmp"
chmod 755 "$TMP/nginx" "$TMP/nginx/html"
(
    cd "$TMP/pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 2 \
        -subj "/CN=phalanx bench CA" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign -keyout ca.key -out ca.pem 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
        -subj /CN=localhost -keyout leaf.key -out leaf.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' > leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 \
        -extfile leaf.ext -out leaf.pem 2>/dev/null
    chmod 600 ca.key leaf.key
)
CA=$TMP/pki/ca.pem

# 600-byte index.html, 16 KiB big.html
{
    printf '<!DOCTYPE html>\n<html>\n<head><title>phalanx bench</title></head>\n<body>\n'
    printf '<h1>phalanx bench</h1>\n<p>Fixed-size page served by a pinned nginx on 127.0.0.1.</p>\n</body>\n</html>\n'
} > "$TMP/nginx/html/head.tmp"
pad=$((600 - $(wc -c < "$TMP/nginx/html/head.tmp") - 8))
{ cat "$TMP/nginx/html/head.tmp"; printf '<!--'; head -c "$pad" /dev/zero | tr '\0' '.'; printf -- '-->\n'; } > "$TMP/nginx/html/index.html"
pad=$((16384 - $(wc -c < "$TMP/nginx/html/head.tmp") - 8))
{ cat "$TMP/nginx/html/head.tmp"; printf '<!--'; head -c "$pad" /dev/zero | tr '\0' 'x'; printf -- '-->\n'; } > "$TMP/nginx/html/big.html"
rm -f "$TMP/nginx/html/head.tmp"
chmod 644 "$TMP/nginx/html/"*
[ "$(wc -c < "$TMP/nginx/html/index.html")" = 600 ] || die "index.html is not 600 bytes"
[ "$(wc -c < "$TMP/nginx/html/big.html")" = 16384 ] || die "big.html is not 16384 bytes"

NGX_VER=$("$NGINX_BIN" -v 2>&1 | sed -n 's#.*nginx/\([0-9.]*\).*#\1#p')
if [ "$(printf '%s\n1.25.1\n' "$NGX_VER" | sort -V | head -n1)" = 1.25.1 ]; then
    H2_LISTEN=""; H2_DIRECTIVE="http2 on;"        # nginx >= 1.25.1
else
    H2_LISTEN=" http2"; H2_DIRECTIVE=""           # nginx 1.22: listen ... ssl http2
fi
# A count above the open files this process may have (less 1,000 for everything else
# the client and nginx hold) is lowered to that, in the log and the report.
MEM_FD_CAP=$(( $(ulimit -n) / 1000 * 1000 - 1000 )); MEM_NOTE=""; mcs=""; MEM_MAX=0
for mc in $MEM_CONNS; do
    if [ "$mc" -gt "$MEM_FD_CAP" ]; then
        MEM_NOTE+=" $mc connections lowered to $MEM_FD_CAP: open files limited to $(ulimit -n) (hard limit $(ulimit -Hn))."
        log "note: BENCH_MEM_CONNS: $mc lowered to $MEM_FD_CAP (open files limited to $(ulimit -n))"
        mc=$MEM_FD_CAP
    fi
    [[ " $mcs " == *" $mc "* ]] || mcs+="$mc "
    [ "$mc" -gt "$MEM_MAX" ] && MEM_MAX=$mc
done
MEM_CONNS=${mcs% }
NGX_CONNS=$(( MEM_MAX + 1024 > 8192 ? MEM_MAX + 1024 : 8192 )); NGX_CONNS=$(( NGX_CONNS > $(ulimit -n) - 100 ? $(ulimit -n) - 100 : NGX_CONNS ))
CPU_MASK=1$(printf '%*s' "$SERVER_CPU" '' | tr ' ' '0')   # CPU n -> "1" + n zeros
USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
NGX_PORT=$(free_port)
cat > "$TMP/nginx/nginx.conf" <<EOF
# generated by bench/run.sh
$USER_LINE
worker_processes     1;
worker_cpu_affinity  $CPU_MASK;
worker_rlimit_nofile $(ulimit -n);
pid                  $NGINX_PID_FILE;
error_log            $TMP/nginx/logs/error.log warn;
lock_file            $TMP/nginx/nginx.lock;
events {
    worker_connections $NGX_CONNS;
    multi_accept       off;
    accept_mutex       off;
}
http {
    types { text/html html; }
    default_type application/octet-stream;
    access_log   off;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path       $TMP/nginx/tmp/proxy;
    fastcgi_temp_path     $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path       $TMP/nginx/tmp/uwsgi;
    scgi_temp_path        $TMP/nginx/tmp/scgi;
    sendfile           on;
    tcp_nopush         on;
    tcp_nodelay        on;
    keepalive_timeout  300s;
    keepalive_requests 1000000;
    reset_timedout_connection on;
    open_file_cache    max=100 inactive=60s;
    ssl_protocols       TLSv1.2 TLSv1.3;
    ssl_session_cache   shared:SSL:10m;
    ssl_session_timeout 10m;
    ssl_session_tickets on;
    server {
        listen 127.0.0.1:$NGX_PORT ssl$H2_LISTEN backlog=4096;
        $H2_DIRECTIVE
        ssl_certificate     $TMP/pki/leaf.pem;
        ssl_certificate_key $TMP/pki/leaf.key;
        root  $TMP/nginx/html;
        index index.html;
    }
}
EOF
NGX_ARGS=(-p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/logs/error.log")
"$NGINX_BIN" "${NGX_ARGS[@]}" -t -q 2>"$TMP/nginx/t.err" || { cat "$TMP/nginx/t.err" >&2; die "nginx config test failed"; }
taskset -c "$SERVER_CPU" "$NGINX_BIN" "${NGX_ARGS[@]}"
URL=https://$H:$NGX_PORT/
URL16=https://$H:$NGX_PORT/big.html
for _ in $(seq 50); do
    code=$(curl -s -m 2 --cacert "$CA" -o /dev/null -w '%{http_code}' "$URL" || true)
    [ "$code" = 200 ] && break; sleep 0.1
done
[ "$code" = 200 ] || die "nginx does not answer 200 on $URL (got '$code'); see $TMP/nginx/logs/error.log"
[ "$(curl -s -m 2 --cacert "$CA" "$URL16" | wc -c)" = 16384 ] || die "big.html not served whole"
NGX_MASTER=$(cat "$NGINX_PID_FILE")
NGX_WORKER=$(ps -o pid= --ppid "$NGX_MASTER" | tr -d ' ' | head -n1)
log "nginx $NGX_VER on $URL: master $NGX_MASTER, worker $NGX_WORKER on CPU $(taskset -cp "$NGX_WORKER" | sed 's/.*: //')"

# lighttpd for ka-h2-lighttpd: the Debian packages unpacked into $TMP (no install, so
# no system service), one process pinned like nginx's worker, same files and leaf.
LT_URL=""; LT_VER=""
if [[ " ${selected[*]} " == *" ka-h2-lighttpd "* ]]; then
    mkdir -p "$TMP/lighttpd/deb"
    if (cd "$TMP/lighttpd/deb" && apt-get download lighttpd lighttpd-mod-openssl >/dev/null 2>&1); then
        for d in "$TMP"/lighttpd/deb/*.deb; do dpkg-deb -x "$d" "$TMP/lighttpd/root"; done
        LT_BIN=$TMP/lighttpd/root/usr/sbin/lighttpd
        LT_VER=$("$LT_BIN" -v 2>&1 | sed -n 's#.*lighttpd/\([0-9.]*\).*#\1#p')
        LT_PORT=$(free_port)
        cat "$TMP/pki/leaf.pem" "$TMP/pki/leaf.key" > "$TMP/lighttpd/leaf-and-key.pem"
        chmod 600 "$TMP/lighttpd/leaf-and-key.pem"
        cat > "$TMP/lighttpd/lighttpd.conf" <<EOF
# generated by bench/run.sh
server.modules        = ("mod_openssl")
server.bind           = "127.0.0.1"
server.port           = $LT_PORT
server.document-root  = "$TMP/nginx/html"
server.errorlog       = "$TMP/lighttpd/error.log"
server.max-fds        = 16384
server.max-connections = 8192
server.max-keep-alive-requests = 1000000
server.max-keep-alive-idle = 300
server.feature-flags  = ("server.h2proto" => "enable")
index-file.names      = ("index.html")
mimetype.assign       = (".html" => "text/html")
ssl.engine            = "enable"
ssl.pemfile           = "$TMP/lighttpd/leaf-and-key.pem"
ssl.openssl.ssl-conf-cmd = ("MinProtocol" => "TLSv1.2")
EOF
        taskset -c "$SERVER_CPU" "$LT_BIN" -D -f "$TMP/lighttpd/lighttpd.conf" -m "$TMP/lighttpd/root/usr/lib/lighttpd" \
            > "$TMP/lighttpd/stdout.log" 2>&1 &
        LT_PID=$!
        LT_URL=https://$H:$LT_PORT/
        for _ in $(seq 50); do
            code=$(curl -s -m 2 --http2 --cacert "$CA" -o /dev/null -w '%{http_code} %{http_version}' "$LT_URL" || true)
            [ "$code" = "200 2" ] && break; sleep 0.1
        done
        [ "$code" = "200 2" ] || die "lighttpd does not answer 200 over HTTP/2 on $LT_URL (got '$code'); see $TMP/lighttpd/error.log"
        log "lighttpd $LT_VER on $LT_URL: pid $LT_PID on CPU $(taskset -cp "$LT_PID" | sed 's/.*: //')"
    else
        log "ka-h2-lighttpd: apt-get download lighttpd lighttpd-mod-openssl failed: row skipped"
    fi
fi
SRV_PID=$NGX_WORKER   # the server process whose CPU the runs measure (define sets it)

# --- 3. coordinator + one agent ---------------------------------------------------
CO_GRPC=$H:$(free_port); CO_GOSSIP=$H:$(free_port)
AG_GRPC=$H:$(free_port); AG_GOSSIP=$H:$(free_port)
taskset -c "$COORD_CPU" "$COORD_BIN" --grpc-addr "$CO_GRPC" --gossip-addr "$CO_GOSSIP" --local --data-dir "" \
    --log-level warn > "$TMP/coordinator.log" 2>&1 &
COORD_PID=$!
PPROF_ARGS=(); PPROF=""
if [ "$PROFILE" = 1 ]; then PPROF=$H:$(free_port); PPROF_ARGS=(--pprof-addr "$PPROF"); fi
"$AGENT_BIN" --cpus "$CLIENT_CPU" --grpc-addr "$AG_GRPC" --gossip-addr "$AG_GOSSIP" --join "$CO_GOSSIP" \
    --local --log-level warn "${PPROF_ARGS[@]}" > "$TMP/agent.log" 2>&1 &
AGENT_PID=$!
ctl() { taskset -c "$COORD_CPU" "$CTL_BIN" --coordinator "$CO_GRPC" "$@"; }

agent_idle() {   # the STATE column found by its header (columns get added)
    ctl agents 2>/dev/null | awk 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "STATE") c = i; next}
        c && $c == "idle" {n++} END {exit !(n == 1)}'
}
wait_idle() {   # wait_idle SECONDS
    local i
    for i in $(seq $(( $1 * 5 ))); do
        kill -0 "$AGENT_PID" 2>/dev/null || die "agent exited; log: $(tail -n 5 "$TMP/agent.log")"
        kill -0 "$COORD_PID" 2>/dev/null || die "coordinator exited; log: $(tail -n 5 "$TMP/coordinator.log")"
        agent_idle && return 0
        sleep 0.2
    done
    return 1
}
wait_idle 30 || die "agent not idle after 30 s: $(ctl agents 2>&1 | tr '\n' ' ')"
log "coordinator $COORD_PID ($CO_GRPC) and agent $AGENT_PID ($AG_GRPC, pinned to CPU $CLIENT_CPU) ready"
ctl agents >&2

# --- 5. measurement helpers ---------------------------------------------------------
ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }   # utime+stime
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
# syscalls PID: its read and write system calls so far (/proc/PID/io syscr, syscw) and its
# threads' voluntary context switches (each a wait that found nothing ready: a wake-up after).
syscalls() {
    local r w v
    read -r r w < <(awk '/^syscr:/ {r = $2} /^syscw:/ {w = $2} END {print r, w}' "/proc/$1/io")
    # cat, not awk's own file list: mawk stops at a file it cannot open (a thread
    # that exited after the glob), cat goes on to the rest.
    v=$(cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches:/ {v += $2} END {print v + 0}')
    echo "$r $w $v"
}
now() { date +%s.%N; }
pct() { awk -v a="$1" -v b="$2" -v x="$3" -v y="$4" -v t="$CLK_TCK" 'BEGIN {printf "%.1f", 100 * (b - a) / t / (y - x)}'; }   # ticks A B over wall X..Y -> % of a core
per_req() { awk -v a="$1" -v b="$2" -v n="$3" -v t="$CLK_TCK" 'BEGIN {if (n > 0) printf "%.2f", (b - a) / t * 1e6 / n; else print "-"}'; }   # ticks A B over N requests -> us/req
# clock_pcts OUTFILE -> "p50 p99" (µs) of BenchmarkClockAlone's output, or "- -".
clock_pcts() {
    awk '/^BenchmarkClockAlone/ {for (i = 2; i < NF; i++) {if ($(i + 1) == "late-p50-us") a = $i; if ($(i + 1) == "late-p99-us") b = $i}}
        END {if (a == "") print "- -"; else printf "%.0f %.0f\n", a, b}' "$1" 2>/dev/null || echo "- -"
}
# timer_pcts HISTFILE -> "p50 p99" (µs) of a cyclictest histogram (-h 20000: a
# percentile among its overflows reads 20000), or "- -" without one.
timer_pcts() {
    [ -s "$1" ] || { echo "- -"; return; }
    awk '/^# Total:/ {tot = $3 + 0} /^#/ {next} $2 + 0 > 0 {v[++n] = $1 + 0; c[n] = $2 + 0}
        END { if (!tot) {print "- -"; exit}
            split("50 99", P, " "); out = ""
            for (k = 1; k <= 2; k++) { s = 0; x = 20000
                for (i = 1; i <= n; i++) { s += c[i]; if (s >= tot * P[k] / 100) { x = v[i]; break } }
                out = out (k > 1 ? " " : "") x }
            print out }' "$1"
}

# parsers print "rps completed errors"
parse_wrk() {
    awk '/^Requests\/sec:/ {r=$2}
         / requests in / {n=$1}
         /Socket errors:/ {gsub(/,/, ""); e+=$4+$6+$8+$10}
         /Non-2xx or 3xx responses:/ {e+=$NF}
         END {print r+0, n+0, e+0}' "$1"
}
parse_h2load() {   # requests: T total, S started, D done, OK succeeded, F failed, ...
    awk '/^finished in/ {r=$4}
         /^requests:/ {n=$8; e=$10}
         /^status codes:/ {e+=$7+$9}        # 4xx + 5xx
         END {print r+0, n+0, e+0}' "$1"
}
parse_ab() {
    awk '/^Requests per second:/ {r=$4}
         /^Complete requests:/ {n=$3}
         /^Failed requests:/ {e+=$3}
         /^Non-2xx responses:/ {e+=$3}
         END {print r+0, n+0, e+0}' "$1"
}

row() { local IFS=$'\t'; echo "$*" >> "$TSV"; }

# per_req_syscalls WHO BEFORE AFTER REQUESTS TAG: WHO's (agent or server:
# the nginx worker or lighttpd) read and write system calls per completed
# request between two `syscalls` readings (/proc/PID/io syscr, syscw; every
# socket and file, the tool's whole run), into the log and the tool's raw
# output, not the table: how many reads and writes one request of that
# traffic costs (small, separate segments cost the server more calls), and how
# many times it woke (voluntary context switches: an epoll_wait that slept).
per_req_syscalls() {
    awk -v who="$1" -v a="$2" -v b="$3" -v n="$4" 'BEGIN {split(a, x, " "); split(b, y, " ");
        if (n > 0) printf "%s syscalls per request: %.3f reads, %.3f writes; %.3f wake-ups\n", who, (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n}' \
        | tee -a "$RAW/$5.out" | while read -r l; do log "$5: $l"; done
}

# run_peer SCENARIO MODE RATE ROUND TOOL -- CMD...
run_peer() {
    local scen=$1 mode=$2 rate=$3 round=$4 tool=$5; shift 6
    local tag=$scen.$mode.$round.peer rc=0 rps n e u s m cpu us rss w0 w1 t0 t1
    printf '%q ' taskset -c "$CLIENT_CPU" "$@" > "$RAW/$tag.cmd"; echo >> "$RAW/$tag.cmd"
    w0=$(ticks "$SRV_PID"); t0=$(now)
    local sio0 sio1; sio0=$(syscalls "$SRV_PID")
    bounded "$RAW/$tag.out" /usr/bin/time -f '%U %S %M' -o "$RAW/$tag.time" \
        taskset -c "$CLIENT_CPU" "$@" || rc=$?
    t1=$(now); w1=$(ticks "$SRV_PID")
    sio1=$(syscalls "$SRV_PID")
    read -r rps n e < <(parse_"$tool" "$RAW/$tag.out") || true
    per_req_syscalls server "$sio0" "$sio1" "$n" "$tag"
    read -r u s m < <(tail -n1 "$RAW/$tag.time" 2>/dev/null) || true
    u=${u:-0}; s=${s:-0}; m=${m:-0}
    cpu=$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}')
    us=$(awk -v c="$cpu" -v n="$n" 'BEGIN {if (n > 0) printf "%.1f", c * 1e6 / n; else print "-"}')
    rss=$(awk -v m="$m" 'BEGIN {printf "%.1f", m / 1024}')
    row "$scen" "$mode" "$rate" "$round" peer "$tool" "$rps" "$n" "$cpu" "$us" "$rss" - "$e" "$rc" - "$(pct "$w0" "$w1" "$t0" "$t1")" - - - - - - \
        "$(per_req "$w0" "$w1" "$n")"
    log "$(printf '%-14s %-6s r%s %-7s %9.0f req/s %8s us/req %7s MB  err=%s rc=%s' "$scen" "$mode" "$round" "$tool" "$rps" "$us" "$rss" "$e" "$rc")"
}

# run_phalanx SCENARIO MODE RATE ROUND URL -- COORDCTL RUN FLAGS...
run_phalanx() {
    local scen=$1 mode=$2 rate=$3 round=$4 url=$5; shift 6
    local tag=$scen.$mode.$round.phalanx rc=0 a0 a1 c0 c1 w0 w1 t0 t1 json=$RAW/$scen.$mode.$round.phalanx.json
    wait_idle 20 || log "warning: agent not idle before $tag"
    printf '%q ' taskset -c "$COORD_CPU" "$CTL_BIN" --coordinator "$CO_GRPC" run "$@" --cacert "$CA" --json "$json" "$url" > "$RAW/$tag.cmd"
    echo >> "$RAW/$tag.cmd"
    echo 5 > "/proc/$AGENT_PID/clear_refs"          # reset the agent's peak RSS (VmHWM)
    a0=$(ticks "$AGENT_PID"); c0=$(ticks "$COORD_PID"); w0=$(ticks "$SRV_PID"); t0=$(now)
    local io0 io1 sio0 sio1; io0=$(syscalls "$AGENT_PID"); sio0=$(syscalls "$SRV_PID")
    bounded "$RAW/$tag.out" taskset -c "$COORD_CPU" "$CTL_BIN" --coordinator "$CO_GRPC" run "$@" \
        --cacert "$CA" --json "$json" "$url" || rc=$?
    t1=$(now); a1=$(ticks "$AGENT_PID"); c1=$(ticks "$COORD_PID"); w1=$(ticks "$SRV_PID")
    io1=$(syscalls "$AGENT_PID"); sio1=$(syscalls "$SRV_PID")
    local hwm rps=0 n=0 e=0 note=- us rss cpu cpct hf=- hr=- cb=- missed=- sched=- ekinds=-
    hwm=$(hwm_kb "$AGENT_PID")
    if [ -s "$json" ] && jq -e . "$json" >/dev/null 2>&1; then
        read -r rps n e < <(jq -r '[.rps // 0, .requests // 0,
            (([.errors // {} | .[]] | add // 0) + (.non_2xx_3xx // 0))] | @tsv' "$json") || true
        IFS=$'\t' read -r hf hr cb missed sched ekinds < <(jq -r '[.handshakes.full // 0, .handshakes.resumed // 0,
            (if .client_bound then 1 else 0 end), .missed // 0, (.issued // 0) + (.unsent // 0),
            ((.errors // {}) | to_entries | map("\(.key)=\(.value)") | join(",") | if . == "" then "-" else . end)
          ] | @tsv' "$json") || true
        note=$(jq -r 'if .tls.version and (.tls.version | keys) != ["TLS 1.3"]
                      then "tls \(.tls.version | keys | join("+"))" else "-" end' "$json")
    fi
    # The agent's read and write system calls per completed request
    # (/proc/PID/io syscr, syscw; every socket and file, the whole run): in
    # the log and the raw outputs, not the table.
    per_req_syscalls agent "$io0" "$io1" "$n" "$tag"
    per_req_syscalls server "$sio0" "$sio1" "$n" "$tag"
    cpu=$(awk -v a="$a0" -v b="$a1" -v t="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / t}')
    us=$(awk -v c="$cpu" -v n="$n" 'BEGIN {if (n > 0) printf "%.1f", c * 1e6 / n; else print "-"}')
    rss=$(awk -v m="$hwm" 'BEGIN {printf "%.1f", m / 1024}')
    cpct=$(pct "$c0" "$c1" "$t0" "$t1")
    row "$scen" "$mode" "$rate" "$round" phalanx phalanx "$rps" "$n" "$cpu" "$us" "$rss" "$cpct" "$e" "$rc" "$note" \
        "$(pct "$w0" "$w1" "$t0" "$t1")" "$hf" "$hr" "$cb" "$missed" "$sched" "$ekinds" "$(per_req "$w0" "$w1" "$n")"
    log "$(printf '%-14s %-6s r%s %-7s %9.0f req/s %8s us/req %7s MB  coord %s%%  err=%s rc=%s  hs %s/%s bound=%s missed=%s/%s errors=%s' \
        "$scen" "$mode" "$round" phalanx "$rps" "$us" "$rss" "$cpct" "$e" "$rc" "$hf" "$hr" "$cb" "$missed" "$sched" "$ekinds")"
    [ "$rc" = 0 ] || log "coordctl failed: $(tail -n 3 "$RAW/$tag.out" | tr '\n' ' ')"
}

# run_profile SCENARIO MODE URL -- COORDCTL RUN FLAGS...: one phalanx run with the
# agent's CPU profile over its window and its allocations during the run (a diff of
# two allocs snapshots); `go tool pprof -top` of each into $RAW and $PROFILES.
PROFILES=""
run_profile() {
    local scen=$1 mode=$2 url=$3; shift 4
    local tag=$scen.$mode.profile rc=0 cpid secs=$(( SECS > 3 ? SECS - 2 : 1 ))
    wait_idle 20 || log "warning: agent not idle before $tag"
    curl -s -m 30 -o "$RAW/$tag.allocs0.pprof" "http://$PPROF/debug/pprof/allocs" || true
    # the CPU profile starts 1 s in (after connection set-up) and ends before the window does
    ( sleep 1; curl -s -m $(( secs + 30 )) -o "$RAW/$tag.cpu.pprof" \
        "http://$PPROF/debug/pprof/profile?seconds=$secs" ) &
    cpid=$!
    bounded "$RAW/$tag.out" taskset -c "$COORD_CPU" "$CTL_BIN" --coordinator "$CO_GRPC" run "$@" \
        --cacert "$CA" "$url" || rc=$?
    wait "$cpid" || true
    curl -s -m 30 -o "$RAW/$tag.allocs1.pprof" "http://$PPROF/debug/pprof/allocs" || true
    [ "$rc" = 0 ] || log "coordctl failed in $tag: $(tail -n 3 "$RAW/$tag.out" | tr '\n' ' ')"
    local rps
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$RAW/$tag.out")
    go tool pprof -top -nodecount=25 "$AGENT_BIN" "$RAW/$tag.cpu.pprof" > "$RAW/$tag.cpu.top" 2>&1 || true
    go tool pprof -sample_index=alloc_space -top -nodecount=12 -diff_base "$RAW/$tag.allocs0.pprof" \
        "$AGENT_BIN" "$RAW/$tag.allocs1.pprof" > "$RAW/$tag.allocs.top" 2>&1 || true
    go tool pprof -sample_index=alloc_objects -top -nodecount=12 -diff_base "$RAW/$tag.allocs0.pprof" \
        "$AGENT_BIN" "$RAW/$tag.allocs1.pprof" > "$RAW/$tag.allocobjs.top" 2>&1 || true
    log "profile $tag: ${rps:-?} req/s; $RAW/$tag.cpu.top"
    PROFILES+=$'\n'"### $scen, $mode (${rps:-?} req/s while profiled)"$'\n\n'
    PROFILES+='```'$'\n'"$(grep -E '^(Duration|Showing nodes)' "$RAW/$tag.cpu.top")"$'\n'
    PROFILES+="$(sed -n '/flat%/,$p' "$RAW/$tag.cpu.top" | head -n 16)"$'\n'
    PROFILES+="allocations during the run: $(grep -E '^Showing nodes' "$RAW/$tag.allocs.top" | head -n1); objects: $(grep -E '^Showing nodes' "$RAW/$tag.allocobjs.top" | head -n1)"$'\n'
    PROFILES+="$(sed -n '/flat%/,$p' "$RAW/$tag.allocobjs.top" | head -n 6)"$'\n''```'$'\n'
}

# median of column COL over rows matching scenario/mode/side
AWK_MED='function med(s,   a, n, i, j, x) {
    n = split(s, a, " "); if (!n) return "-"
    for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'
median_rps() {   # median_rps SCENARIO MODE SIDE
    awk -F'\t' -v s="$1" -v m="$2" -v d="$3" "$AWK_MED"'
        $1 == s && $2 == m && $5 == d && $7 + 0 > 0 {v = v " " $7} END {print med(v)}' "$TSV"
}

# --- 4. scenarios ------------------------------------------------------------------
# scenario: URL, phalanx flags, peer closed-loop command, peer fixed-rate command
define() {   # define SCENARIO [RATE]: sets SURL PFLAGS PTOOL PEER (closed) RTOOL RPEER (rate)
    local scen=$1 rate=${2:-0} per=$(( ${2:-0} / CONNS ))
    SURL=$URL; RTOOL=""; RPEER=(); SRV_PID=$NGX_WORKER
    case $scen in
        ka-h1)
            PFLAGS=(-c"$CONNS"); PTOOL=wrk
            PEER=(wrk -t1 -c"$CONNS" -d"${SECS}s" "$SURL")
            RTOOL=h2load; RPEER=(h2load --h1 -t1 -c"$CONNS" -D "$SECS" --rps="$per" "$SURL") ;;
        ka-h1-16k)
            SURL=$URL16; PFLAGS=(-c"$CONNS"); PTOOL=wrk
            PEER=(wrk -t1 -c"$CONNS" -d"${SECS}s" "$SURL")
            RTOOL=h2load; RPEER=(h2load --h1 -t1 -c"$CONNS" -D "$SECS" --rps="$per" "$SURL") ;;
        ka-h2-lighttpd)
            [ -n "$LT_URL" ] || return 1
            SURL=$LT_URL; SRV_PID=$LT_PID
            PFLAGS=(--http2 -m10 -c"$CONNS"); PTOOL=h2load
            PEER=(h2load -t1 -c"$CONNS" -m10 -D "$SECS" "$SURL")
            RTOOL=h2load; RPEER=(h2load -t1 -c"$CONNS" -m10 -D "$SECS" --rps="$per" "$SURL") ;;
        ka-h2)
            PFLAGS=(--http2 -m10 -c"$CONNS"); PTOOL=h2load
            PEER=(h2load -t1 -c"$CONNS" -m10 -D "$SECS" "$SURL")
            RTOOL=h2load; RPEER=(h2load -t1 -c"$CONNS" -m10 -D "$SECS" --rps="$per" "$SURL") ;;
        short-full)
            # wrk and h2load resume TLS sessions on reconnect (BASELINE.md) and have no
            # switch against it; ab never resumes. ab has no fixed rate: rate peer n/a.
            # --curves X25519: the one group the peers' OpenSSL offers (Go's default
            # adds an X25519MLKEM768 key share to every handshake: about a fifth more
            # CPU per resumed connection on the AMD VM, README "Performance").
            PFLAGS=(--no-keepalive --curves X25519 -c"$CONNS"); PTOOL=ab
            # -t bounds the time; ab allocates its stats array for -n up front, so -n is
            # sized for 5,000 req/s (far above what full handshakes reach on one core)
            PEER=(ab -q -t "$SECS" -n $((5000 * SECS)) -c "$CONNS" "$SURL") ;;
        short-resumed)
            PFLAGS=(--no-keepalive --tls-resume --curves X25519 -c"$CONNS"); PTOOL=wrk  # as short-full
            PEER=(wrk -t1 -c"$CONNS" -d"${SECS}s" -H 'Connection: close' "$SURL")
            # no fixed-rate peer: h2load 1.52 ignores --rps with 'Connection: close' and
            # hangs at the end of a -D run with it; wrk has no rate.
            ;;
        *) die "unknown scenario $scen" ;;
    esac
    [ "$rate" -gt 0 ] && [ "$per" -lt 1 ] && { RTOOL=""; RPEER=(); }
    return 0
}

n_runs=$(( ${#selected[@]} * ROUNDS * 4 ))
log "scenarios: ${selected[*]:-none}; $ROUNDS round(s) of ${SECS}s, $CONNS connections; at most ~$(( (n_runs * (SECS + 3) + 4 * MEM_SECS + 2 * MEM_MAX / 250 + 20) / 60 + 1 )) min"

idle_a0=$(ticks "$AGENT_PID"); idle_c0=$(ticks "$COORD_PID"); idle_t0=$(now)
sleep 2
idle_t1=$(now)
idle_agent_pct=$(pct "$idle_a0" "$(ticks "$AGENT_PID")" "$idle_t0" "$idle_t1")
idle_coord_pct=$(pct "$idle_c0" "$(ticks "$COORD_PID")" "$idle_t0" "$idle_t1")
idle_agent_rss=$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$AGENT_PID/status")

# --- 5b. memory over a long run (BENCH_RSS_REQUESTS) ----------------------------------
if [ "$RSS_REQUESTS" -gt 0 ]; then
    RSS_TSV=$RES/rss.tsv
    log "== memory: $RSS_REQUESTS keep-alive requests on $CONNS connections, agent RSS every ${RSS_EVERY}s"
    printf 'elapsed_s\trss_mb\tagent_cpu_s\n' > "$RSS_TSV"
    rss_t0=$(now); rss_a0=$(ticks "$AGENT_PID")
    (
        while :; do
            printf '%s\t%s\t%s\n' "$(awk -v a="$rss_t0" -v b="$(now)" 'BEGIN {printf "%.0f", b - a}')" \
                "$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$AGENT_PID/status")" \
                "$(awk -v a="$rss_a0" -v b="$(ticks "$AGENT_PID")" -v t="$CLK_TCK" 'BEGIN {printf "%.1f", (b - a) / t}')" >> "$RSS_TSV"
            sleep "$RSS_EVERY"
        done
    ) &
    RSS_SAMPLER=$!
    RUN_CAP=$(( RSS_REQUESTS / 2000 + 120 ))     # bounded: at least 2,000 req/s
    rc=0
    bounded "$RAW/rss.out" taskset -c "$COORD_CPU" "$CTL_BIN" --coordinator "$CO_GRPC" run -c"$CONNS" \
        -n "$RSS_REQUESTS" --cacert "$CA" --json "$RAW/rss.json" "$URL" || rc=$?
    kill "$RSS_SAMPLER" 2>/dev/null; wait "$RSS_SAMPLER" 2>/dev/null || true
    [ "$rc" = 0 ] || die "the long run failed (rc $rc): $(tail -n 5 "$RAW/rss.out" | tr '\n' ' ')"
    read -r n rps < <(jq -r '[.requests, .rps] | @tsv' "$RAW/rss.json")
    # flat: after a warm-up of a tenth of the samples, RSS at the end vs its minimum since
    RSS_LINE=$(awk -F'\t' -v n="$n" -v rps="$rps" 'NR > 1 {t[++k] = $1; r[k] = $2}
        END {
            w = int(k / 10) + 1; lo = r[w]; hi = r[w]
            for (i = w; i <= k; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
            printf "%d requests in %.0f s (%.0f req/s): agent RSS %.1f MB at %d s (after warm-up), min %.1f / max %.1f MB from then on, %.1f MB at the end (%+.1f %% vs after warm-up).",
                n, t[k], rps, r[w], t[w], lo, hi, r[k], 100 * (r[k] - r[w]) / r[w]
        }' "$RSS_TSV")
    {
        echo "# make bench-memory: agent RSS over a long run ($STAMP)"
        echo
        echo "- machine: $NCPU CPU, kernel $(uname -r); nginx $NGX_VER, 1 worker on CPU $SERVER_CPU; 1 agent (--cpus $CLIENT_CPU), $CONNS keep-alive connections, 600-byte page; phalanx $PHX_DESC"
        echo
        echo "$RSS_LINE"
        echo
        echo "| elapsed s | agent RSS MB | agent CPU s |"
        echo "|--:|--:|--:|"
        awk -F'\t' 'NR > 1 {printf "| %s | %s | %s |\n", $1, $2, $3}' "$RSS_TSV"
        echo
        echo "Samples: \`${RSS_TSV#"$ROOT"/}\`; the run's report: \`${RAW#"$ROOT"/}/rss.out\`."
    } > "$REPORT"
    echo; cat "$REPORT"; echo
    log "report: $REPORT"
    exit 0
fi

for scen in "${selected[@]}"; do
    define "$scen" || { log "$scen: its server is not running: skipped"; continue; }
    log "== $scen closed loop: ${PEER[0]} vs phalanx ${PFLAGS[*]}"
    for r in $(seq "$ROUNDS"); do
        run_peer "$scen" closed - "$r" "$PTOOL" -- "${PEER[@]}"
        sleep 1
        run_phalanx "$scen" closed - "$r" "$SURL" -- "${PFLAGS[@]}" -d "${SECS}s"
        sleep 1
    done
    [ "$PROFILE" = 1 ] && run_profile "$scen" closed "$SURL" -- "${PFLAGS[@]}" -d "${SECS}s"
    med=$(median_rps "$scen" closed peer)
    if [ "$med" = - ]; then
        log "$scen: no peer closed-loop median; fixed-rate runs skipped"; continue
    fi
    rate=$(awk -v m="$med" -v f="$RATE_FRACTION" -v c="$CONNS" 'BEGIN {r = int(m * f / c) * c; if (r < c) r = c; print r}')
    define "$scen" "$rate"
    log "== $scen at a fixed $rate req/s (${RATE_FRACTION} x peer median $med): ${RTOOL:-no peer} vs phalanx -R $rate"
    for r in $(seq "$ROUNDS"); do
        if [ -n "$RTOOL" ]; then
            run_peer "$scen" rate "$rate" "$r" "$RTOOL" -- "${RPEER[@]}"
            sleep 1
        fi
        run_phalanx "$scen" rate "$rate" "$r" "$SURL" -- "${PFLAGS[@]}" -R "$rate" -d "${SECS}s"
        sleep 1
        if [ -n "$RTOOL" ] && [ -n "$PACING_WINDOW" ]; then
            run_phalanx "$scen" ratew "$rate" "$r" "$SURL" -- "${PFLAGS[@]}" -R "$rate" -d "${SECS}s" --pacing-window "$PACING_WINDOW"
            sleep 1
        fi
    done
    [ "$PROFILE" = 1 ] && run_profile "$scen" rate "$SURL" -- "${PFLAGS[@]}" -R "$rate" -d "${SECS}s"
    if [ "$PROFILE" = 1 ] && [ -n "$RTOOL" ] && [ -n "$PACING_WINDOW" ]; then
        run_profile "$scen" ratew "$SURL" -- "${PFLAGS[@]}" -R "$rate" -d "${SECS}s" --pacing-window "$PACING_WINDOW"
    fi
done

# --- 5c. -R sweep with send lateness (the "lateness" rows) -------------------------------
# HTTP/1.1 (lateness-h1) and HTTP/2 (-m10, lateness-h2) on the 600-byte page at each rate
# of LATENESS_RATES, h2load --rps (rate / CONNS per client) then phalanx -R, interleaved
# per round; and, from the ka-h1 / ka-h2 fixed-rate rows when they ran, the same at 60 %
# (RATE_FRACTION) of the peer's closed-loop median. Per rate: both tools' CPU per request
# and, from phalanx's JSON, send lateness p50/p99, latency p50 - service time p50.
LATENESS_TABLE=""
if [ "$LATENESS" = 1 ]; then
    SRV_PID=$NGX_WORKER
    for r in $(seq "$ROUNDS"); do
        # The service time's reference: one connection in closed loop,
        # each request sent when the last one ends (the server never idle
        # long between them).
        log "== lateness: phalanx -c1 closed loop (service time reference), round $r"
        run_phalanx lateness-h1 c1 - "$r" "$URL" -- -c1 -d "${SECS}s"
        sleep 1
        for proto in h1 h2; do
            for rate in $LATENESS_RATES; do
                per=$(( rate / CONNS )); [ "$per" -ge 1 ] || per=1
                if [ "$proto" = h1 ]; then
                    hp=(h2load --h1 -t1 -c"$CONNS" -D "$SECS" --rps="$per" "$URL"); pf=(-c"$CONNS")
                else
                    hp=(h2load -t1 -c"$CONNS" -m10 -D "$SECS" --rps="$per" "$URL"); pf=(--http2 -m10 -c"$CONNS")
                fi
                log "== lateness-$proto: h2load --rps $per x $CONNS vs phalanx -R $rate, round $r"
                run_peer "lateness-$proto" "R$rate" "$rate" "$r" h2load -- "${hp[@]}"
                sleep 1
                run_phalanx "lateness-$proto" "R$rate" "$rate" "$r" "$URL" -- "${pf[@]}" -R "$rate" -d "${SECS}s"
                sleep 1
                if [ -n "$PACING_WINDOW" ]; then
                    run_phalanx "lateness-$proto" "R${rate}w" "$rate" "$r" "$URL" -- "${pf[@]}" -R "$rate" -d "${SECS}s" --pacing-window "$PACING_WINDOW"
                    sleep 1
                fi
                if [ "$PACING_SPIN" = 1 ]; then
                    run_phalanx "lateness-$proto" "R${rate}s" "$rate" "$r" "$URL" -- "${pf[@]}" -R "$rate" -d "${SECS}s" --pacing-spin
                    sleep 1
                fi
                if [ "$proto" = h1 ]; then
                    # The machine's own floor: a thread sleeping on the kernel's
                    # high-resolution timer for the mean interval between sends,
                    # on the client CPU, at normal priority (as the agent's).
                    log "== lateness: cyclictest -i $(( 1000000 / rate )) us on CPU $CLIENT_CPU, round $r"
                    bounded "$RAW/cyclictest.R$rate.$r.out" cyclictest -q -D "$SECS" -i $(( 1000000 / rate )) \
                        -a "$CLIENT_CPU" -t 1 -h 20000 --histfile="$RAW/cyclictest.R$rate.$r.hist" || true
                    # And the agent's own clock alone (its timerfd through the Go
                    # netpoller, no connection and no request) at that interval.
                    log "== lateness: the agent's clock alone, interval $(( 1000000 / rate )) us on CPU $CLIENT_CPU, round $r"
                    PHALANX_BENCH_CLOCK_INTERVALS="$(( 1000000 / rate ))us" PHALANX_BENCH_CLOCK_SECONDS="$SECS" \
                        bounded "$RAW/clock.R$rate.$r.out" taskset -c "$CLIENT_CPU" "$ROOT/bin/engine.test" \
                        -test.run '^$' -test.bench '^BenchmarkClockAlone$' -test.benchtime 1x || true
                fi
            done
        done
    done
    # Service time p50 at each rate over the closed-loop -c1 latency p50
    # (medians over rounds; HTTP/1.1).
    pct_med() {   # pct_med MODE JQPATH: the median over rounds of one JSON figure
        for r in $(seq "$ROUNDS"); do
            j=$RAW/lateness-h1.$1.$r.phalanx.json
            [ -s "$j" ] && jq -r "$2 // empty" "$j"
        done | awk "$AWK_MED"'{v = v " " $1} END {m = med(v); if (m != "-") print m}'
    }
    C1_P50=$(pct_med c1 .latency_us.p50)
    C1_LINE="Closed loop -c1 (HTTP/1.1, one connection, ${SECS}s): latency p50 ${C1_P50:--} µs;"
    for rate in $LATENESS_RATES; do
        svc=$(pct_med "R$rate" .service_time_us.p50)
        C1_LINE+=$(awk -v s="${svc:-}" -v c="${C1_P50:-}" -v r="$rate" 'BEGIN {
            if (s == "" || c == "" || c == 0) printf " -R %s: service p50 -;", r
            else printf " -R %s: service p50 %s µs, %.2f x;", r, s, s / c }')
    done
    LATENESS_TABLE=$(
        echo "| protocol | -R | h2load RPS | phalanx RPS | h2load µs/req | phalanx µs/req | ratio phalanx/h2load | send lateness p50 µs | p99 µs | timer wake-up p50 µs | p99 µs | clock alone p50 µs | p99 µs | latency p50 − service p50 µs | service p50 µs | client-bound rounds |"
        echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
        for proto in h1 h2; do
            src=()
            for rate in $LATENESS_RATES; do
                src+=("lateness-$proto R$rate R$rate $rate")
                [ -n "$PACING_WINDOW" ] && src+=("lateness-$proto R${rate}w R$rate $rate window $PACING_WINDOW")
                [ "$PACING_SPIN" = 1 ] && src+=("lateness-$proto R${rate}s R$rate $rate spin")
            done
            ka=ka-h1; [ "$proto" = h2 ] && ka=ka-h2
            krate=$(awk -F'\t' -v s="$ka" '$1 == s && $2 == "rate" {print $3; exit}' "$TSV")
            [ -n "$krate" ] && src+=("$ka rate rate $krate (${RATE_FRACTION} x closed max)")
            [ -n "$krate" ] && [ -n "$PACING_WINDOW" ] && src+=("$ka ratew rate $krate (${RATE_FRACTION} x closed max), window $PACING_WINDOW")
            for e in "${src[@]}"; do
                read -r scen mode pmode rate label <<< "$e"
                for r in $(seq "$ROUNDS"); do
                    j=$RAW/$scen.$mode.$r.phalanx.json
                    [ -s "$j" ] || continue
                    read -r prps pus < <(awk -F'\t' -v s="$scen" -v m="$pmode" -v r="$r" \
                        '$1 == s && $2 == m && $4 == r && $5 == "peer" {print $7, $10}' "$TSV") || true
                    read -r xrps xus < <(awk -F'\t' -v s="$scen" -v m="$mode" -v r="$r" \
                        '$1 == s && $2 == m && $4 == r && $5 == "phalanx" {print $7, $10}' "$TSV") || true
                    read -r tp50 tp99 < <(timer_pcts "$RAW/cyclictest.R$rate.$r.hist")
                    read -r cp50 cp99 < <(clock_pcts "$RAW/clock.R$rate.$r.out")
                    jq -r --arg a "${prps:--}" --arg b "${xrps:--}" --arg c "${pus:--}" --arg d "${xus:--}" '[$a, $b, $c, $d,
                        (.send_lateness_us.p50 // "-"), (.send_lateness_us.p99 // "-"),
                        (if .latency_us and .service_time_us then .latency_us.p50 - .service_time_us.p50 else "-" end),
                        (.service_time_us.p50 // "-"), (if .client_bound then 1 else 0 end)] | @tsv' "$j" |
                        awk -v a="$tp50" -v b="$tp99" -v c="$cp50" -v d="$cp99" 'BEGIN {OFS = "\t"} {print $0, a, b, c, d}'
                done | awk -F'\t' -v proto="$proto" -v rate="$rate" -v label="${label:-}" '
                    {n++; for (i = 1; i <= 8; i++) v[i, n] = $i; cb += $9; v[9, n] = $10; v[10, n] = $11; v[11, n] = $12; v[12, n] = $13}
                    function med(i,   a, k, m, t, x) { m = 0; for (k = 1; k <= n; k++) if (v[i, k] != "-" && v[i, k] != "") a[++m] = v[i, k] + 0
                        if (m == 0) return "-"
                        for (k = 1; k <= m; k++) for (t = k + 1; t <= m; t++) if (a[t] < a[k]) { x = a[k]; a[k] = a[t]; a[t] = x }
                        return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
                    function f(x, fmt) { return x == "-" ? "-" : sprintf(fmt, x) }
                    END { if (!n) exit
                        pu = med(3); xu = med(4); ratio = (pu != "-" && xu != "-" && pu > 0) ? sprintf("%.2f", xu / pu) : "-"
                        printf "| %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d of %d |\n",
                            (proto == "h1" ? "HTTP/1.1" : "HTTP/2 -m10"), rate, (label ? " " label : ""),
                            f(med(1), "%.0f"), f(med(2), "%.0f"), f(pu, "%.1f"), f(xu, "%.1f"), ratio,
                            f(med(5), "%.0f"), f(med(6), "%.0f"), f(med(9), "%.0f"), f(med(10), "%.0f"), f(med(11), "%.0f"), f(med(12), "%.0f"),
                            f(med(7), "%.0f"), f(med(8), "%.0f"), cb, n }'
            done
        done
    )
fi

# --- 5d. connection rate (the "cps" rows) ----------------------------------------------
# Its runs go to their own TSV (not the main table): one request per connection, so
# the µs per request of run_peer and run_phalanx are per connection too; the table
# divides phalanx's CPU by the JSON's connections opened in the window.
CPS_TABLE=""
if [ "$CPS" = 1 ]; then
    SRV_PID=$NGX_WORKER
    MAIN_TSV=$TSV; TSV=$RES/cps.tsv; head -n1 "$MAIN_TSV" > "$TSV"
    cps_n=$(( CPS_RATE * SECS )); cps_burst=$(( CPS_RATE / 100 )); cps_period=10ms
    for r in $(seq "$ROUNDS"); do
        log "== cps: h2load -r $cps_burst --rate-period $cps_period (${CPS_RATE}/s, $cps_n connections) vs phalanx --cps $CPS_RATE, round $r"
        run_peer cps full "$CPS_RATE" "$r" h2load -- h2load --h1 -t1 -r "$cps_burst" --rate-period "$cps_period" \
            -c "$cps_n" -n "$cps_n" "$URL"
        sleep 1
        # X25519 as h2load's OpenSSL offers: Go's default adds an ML-KEM-768 key share
        run_phalanx cps full "$CPS_RATE" "$r" "$URL" -- --cps "$CPS_RATE" --curves X25519 -d "${SECS}s"
        sleep 1
        run_phalanx cps resumed70 "$CPS_RATE" "$r" "$URL" -- --cps "$CPS_RATE" --curves X25519 --resume-ratio 0.7 -d "${SECS}s"
        sleep 1
    done
    TSV=$MAIN_TSV
    # per round: mode, side, conns/s, µs/conn client, µs/conn server, resumed %, missed %, client-bound
    for r in $(seq "$ROUNDS"); do
        awk -F'\t' -v r="$r" '$1 == "cps" && $4 == r && $5 == "peer" && $8 + 0 > 0 {
            printf "full\tpeer\t%s\t%.1f\t%s\t-\t-\t-\n", $7, $9 * 1e6 / $8, $23}' "$RES/cps.tsv"
        for m in full resumed70; do
            j=$RAW/cps.$m.$r.phalanx.json
            [ -s "$j" ] || continue
            cpu=$(awk -F'\t' -v r="$r" -v m="$m" '$1 == "cps" && $2 == m && $4 == r && $5 == "phalanx" {print $9}' "$RES/cps.tsv")
            # the server's CPU per completed request (run_phalanx): per connection, at one each
            srv=$(awk -F'\t' -v r="$r" -v m="$m" '$1 == "cps" && $2 == m && $4 == r && $5 == "phalanx" {print $23}' "$RES/cps.tsv")
            jq -r --arg m "$m" --arg cpu "${cpu:-0}" --arg srv "${srv:--}" '
                (.connection_rate.connections // 0) as $n | (.handshakes.full + .handshakes.resumed) as $h |
                [$m, "phalanx", (.connection_rate.cps // 0),
                 (if $n > 0 then ($cpu | tonumber) * 1e6 / $n else "-" end), $srv,
                 (if $h > 0 then 100 * .handshakes.resumed / $h else "-" end),
                 (if (.connection_rate.connections + .unsent) > 0 then 100 * .missed / (.connection_rate.connections + (.unsent // 0)) else "-" end),
                 (if .client_bound then 1 else 0 end)] | @tsv' "$j"
        done
    done > "$RES/cps-rounds.tsv"
    CPS_TABLE=$(awk -F'\t' -v rate="$CPS_RATE" "$AWK_MED"'
        function f(v, fmt) { return (v == "-" || v == "") ? "-" : sprintf(fmt, v) }
        $2 == "peer" {pc = pc " " $3; pu = pu " " $4; if ($5 != "-") ps = ps " " $5; next}
        {k = $1; xc[k] = xc[k] " " $3; if ($4 != "-") xu[k] = xu[k] " " $4; if ($5 != "-") xs[k] = xs[k] " " $5
         if ($6 != "-") res[k] = res[k] " " $6; if ($7 != "-") mis[k] = mis[k] " " $7; cb[k] += $8; n[k]++}
        END {
            print "| row | target conns/s | peer | peer conns/s | phalanx conns/s | peer µs/conn | phalanx µs/conn | ratio phalanx/peer | server µs/conn (peer) | server µs/conn (phalanx) | server ratio | phalanx resumed % | phalanx missed starts % | client-bound rounds |"
            print "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
            split("full resumed70", ks, " ")
            for (i = 1; i <= 2; i++) {
                k = ks[i]; if (!(k in n)) continue
                mpu = med(pu); mxu = med(xu[k]); mps = med(ps); mxs = med(xs[k])
                printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d of %d |\n",
                    (k == "full") ? "cps, full handshakes" : "cps, 70 % resumed (peer: full, h2load cannot resume)",
                    rate, "h2load -r", f(med(pc), "%.0f"), f(med(xc[k]), "%.0f"), f(mpu, "%.1f"), f(mxu, "%.1f"),
                    (mpu != "-" && mxu != "-" && mpu > 0) ? sprintf("%.2f", mxu / mpu) : "-",
                    f(mps, "%.1f"), f(mxs, "%.1f"), (mps != "-" && mxs != "-" && mps > 0) ? sprintf("%.2f", mxs / mps) : "-",
                    f(med(res[k]), "%.1f"), f(med(mis[k]), "%.1f"), cb[k], n[k]
            }
        }' "$RES/cps-rounds.tsv")
fi

# --- 7. memory at each of MEM_CONNS keep-alive connections --------------------------
# One wrk -t1 run and one phalanx run per count, ascending (a long-lived agent keeps
# heap from a larger run). Each lasts max(MEM_SECS, count / 500) s: wrk's duration
# includes its handshakes (about 2,000/s on one core), the agent's window follows them.
# They run against an nginx of their own: one worker holds at most the open files
# it may have (NGX_CONNS), so this one has as many workers as MEM_MAX needs (with 10 %
# for the kernel's uneven reuseport spread), all on the server CPU.
MEM_TABLE=""
if [ -n "$MEM_CONNS" ]; then
    MEM_WORKERS=$(( MEM_MAX * 11 / 10 / (NGX_CONNS - 200) + 1 ))
    MEM_PORT=$(free_port)
    sed -e "s#^worker_processes .*#worker_processes     $MEM_WORKERS;#" \
        -e "s#^worker_cpu_affinity .*#worker_cpu_affinity $(for _ in $(seq "$MEM_WORKERS"); do printf ' %s' "$CPU_MASK"; done);#" \
        -e "s#^pid .*#pid                  $TMP/nginx/mem.pid;#" -e "s#^lock_file .*#lock_file            $TMP/nginx/mem.lock;#" \
        -e "s#listen 127.0.0.1:$NGX_PORT ssl#listen 127.0.0.1:$MEM_PORT reuseport ssl#" "$TMP/nginx/nginx.conf" > "$TMP/nginx/mem.conf"
    MEM_NGX_ARGS=(-p "$TMP/nginx" -c "$TMP/nginx/mem.conf" -e "$TMP/nginx/logs/error.log")
    "$NGINX_BIN" "${MEM_NGX_ARGS[@]}" -t -q 2>"$TMP/nginx/t.err" || { cat "$TMP/nginx/t.err" >&2; die "nginx config test failed (memory rows)"; }
    taskset -c "$SERVER_CPU" "$NGINX_BIN" "${MEM_NGX_ARGS[@]}"
    MEM_URL=https://$H:$MEM_PORT/
    for _ in $(seq 50); do
        code=$(curl -s -m 2 --cacert "$CA" -o /dev/null -w '%{http_code}' "$MEM_URL" || true)
        [ "$code" = 200 ] && break; sleep 0.1
    done
    [ "$code" = 200 ] || die "nginx (memory rows) does not answer 200 on $MEM_URL (got '$code')"
    SRV_PID=$(ps -o pid= --ppid "$(cat "$TMP/nginx/mem.pid")" | tr -d ' ' | head -n1)   # CPU of one worker only
    log "nginx for the memory rows on $MEM_URL: $MEM_WORKERS worker(s) of $NGX_CONNS connections on CPU $SERVER_CPU"
    for mc in $MEM_CONNS; do
        secs=$(( mc / 500 > MEM_SECS ? mc / 500 : MEM_SECS ))
        RUN_CAP=$(( secs + mc / 500 + 60 ))
        log "== memory: $mc keep-alive connections, ${secs}s each"
        run_peer mem-c$mc closed - 1 wrk -- wrk -t1 -c"$mc" -d"${secs}s" "$MEM_URL"
        sleep 2
        hpid=""
        if [ "$PROFILE" = 1 ]; then   # the agent's heap in the middle of its window
            ( sleep $(( secs / 2 + mc / 1000 + 2 )); curl -s -m 30 -o "$RAW/mem-c$mc.heap.pprof" "http://$PPROF/debug/pprof/heap" ) &
            hpid=$!
        fi
        run_phalanx mem-c$mc closed - 1 "$MEM_URL" -- -c"$mc" -d "${secs}s"
        [ -n "$hpid" ] && { wait "$hpid" || true; }
        [ -s "$RAW/mem-c$mc.heap.pprof" ] && go tool pprof -sample_index=inuse_space -top -nodecount=20 "$AGENT_BIN" \
            "$RAW/mem-c$mc.heap.pprof" > "$RAW/mem-c$mc.heap.top" 2>&1
        sleep 2
    done
    RUN_CAP=$((SECS + 60))
    MEM_TABLE=$(
        echo "| connections | wrk peak RSS MB | wrk KB/conn | phalanx peak RSS MB | phalanx KB/conn | ratio phalanx/wrk | phalanx KB/conn above idle | wrk req/s | phalanx req/s | errors wrk / phalanx |"
        echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
        for mc in $MEM_CONNS; do
            awk -F'\t' -v s="mem-c$mc" -v c="$mc" -v idle="$idle_agent_rss" '
                $1 == s && $5 == "peer"    {wr = $11; wq = $7; we = $13; wc = $14}
                $1 == s && $5 == "phalanx" {pr = $11; pq = $7; pe = $13; pc = $14}
                END {
                    wk = wr * 1024 / c; pk = pr * 1024 / c
                    printf "| %d | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %.0f | %.0f | %d%s / %d%s |\n", c, wr, wk, pr, pk,
                        (wk > 0 ? sprintf("%.2f", pk / wk) : "-"), (pr - idle) * 1024 / c, wq, pq,
                        we, (wc != 0 ? " (rc " wc ")" : ""), pe, (pc != 0 ? " (rc " pc ")" : "")
                }' "$TSV"
        done
    )
fi

# --- 6. table ----------------------------------------------------------------------
TABLE=$(awk -F'\t' -v win="$PACING_WINDOW" "$AWK_MED"'
    function f(v, fmt) { return (v == "-" || v == "") ? "-" : sprintf(fmt, v) }
    NR == 1 || $1 ~ /^mem-/ {next}
    {
        k = $1 SUBSEP $2; if (!(k in seen)) {seen[k] = 1; order[++no] = k; scen[k] = $1; mode[k] = $2; rate[k] = $3}
        if ($5 == "peer") {
            tool[k] = $6; if ($7 + 0 > 0) prps[k] = prps[k] " " $7
            if ($10 != "-") pus[k] = pus[k] " " $10; prss[k] = prss[k] " " $11
            if ($13 > 0 || $14 != 0) pbad[k]++
            pngx[k] = pngx[k] " " $16
            if ($23 != "-" && $23 != "") pnus[k] = pnus[k] " " $23
        } else {
            xngx[k] = xngx[k] " " $16
            if ($23 != "-" && $23 != "") xnus[k] = xnus[k] " " $23
            if ($7 + 0 > 0) xrps[k] = xrps[k] " " $7
            if ($10 != "-") xus[k] = xus[k] " " $10; xrss[k] = xrss[k] " " $11; cc[k] = cc[k] " " $12
            if ($13 > 0 || $14 != 0) xbad[k]++
            if ($15 != "-" && !((k, $15) in nseen)) { nseen[k, $15] = 1; notes[k] = notes[k] (notes[k] ? "; " : "") $15 }
            xn_runs[k]++
            if ($17 + $18 > 0 && $1 ~ /^short/) res[k] = res[k] " " 100 * $18 / ($17 + $18)
            if ($19 == 1) bound[k]++
            if ($2 ~ /^rate/ && $21 + 0 > 0) late[k] = late[k] " " 100 * $20 / $21
            if ($22 != "-" && $22 != "") { erun[k]++; ek[k] = ek[k] (ek[k] ? "; " : "") "r" $4 ": " $22 }
        }
    }
    END {
        print "| scenario | mode | peer tool | peer RPS | phalanx RPS | peer µs/req | phalanx µs/req | ratio phalanx/peer | server µs/req (peer) | server µs/req (phalanx) | server ratio phalanx/peer | peer RSS MB | phalanx RSS MB | coordinator CPU % | notes |"
        print "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
        for (i = 1; i <= no; i++) {
            k = order[i]
            # A window row (mode ratew or RNw: phalanx --pacing-window) is
            # compared with the peer runs of the same scenario and mode
            # without the w.
            win_row = (mode[k] ~ /^(ratew|R[0-9]+w)$/)
            pk = win_row ? scen[k] SUBSEP substr(mode[k], 1, length(mode[k]) - 1) : k
            pu = med(pus[pk]); xu = med(xus[k])
            ratio = (pu != "-" && xu != "-" && pu > 0) ? sprintf("%.2f", xu / pu) : "-"
            pnu = med(pnus[pk]); xnu = med(xnus[k])
            nratio = (pnu != "-" && xnu != "-" && pnu > 0) ? sprintf("%.2f", xnu / pnu) : "-"
            m = (mode[k] == "closed") ? "closed" : "rate " rate[k] "/s" (win_row ? ", window " win : "")
            t = (pk in tool) ? tool[pk] : "n/a"
            nt = ""
            if (res[k] != "") nt = nt (nt ? "; " : "") sprintf("resumed %.0f%% of handshakes", med(res[k]))
            if (late[k] != "") nt = nt (nt ? "; " : "") sprintf("missed sends %.0f%%", med(late[k]))
            if (bound[k]) nt = nt (nt ? "; " : "") "client-bound in " bound[k] "/" xn_runs[k]
            if (erun[k]) nt = nt (nt ? "; " : "") "errors in " erun[k] "/" xn_runs[k] " (" ek[k] ")"
            if (notes[k] != "") nt = nt (nt ? "; " : "") notes[k]
            pn = med(pngx[pk]); xn = med(xngx[k])
            nt = "server CPU " ((pk in tool) ? sprintf("%.0f%%", pn) " (peer) / " : "") sprintf("%.0f%%", xn) " (phalanx)" (nt ? "; " nt : "")
            pr = med(prps[pk]); xr = med(xrps[k])
            if ((pk in tool) && pr != "-" && xr != "-" && pr > 0) nt = sprintf("RPS ratio phalanx/peer %.2f; ", xr / pr) nt
            if (pbad[pk]) nt = nt (nt ? "; " : "") "peer errors in " pbad[pk] " run(s)"
            if (xbad[k] && !erun[k]) nt = nt (nt ? "; " : "") "phalanx failed in " xbad[k] " run(s)"
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", scen[k], m, t,
                (pk in tool) ? f(med(prps[pk]), "%.0f") : "n/a", f(med(xrps[k]), "%.0f"),
                (pk in tool) ? f(pu, "%.1f") : "n/a", f(xu, "%.1f"), ratio,
                (pk in tool) ? f(pnu, "%.2f") : "n/a", f(xnu, "%.2f"), nratio,
                (pk in tool) ? f(med(prss[pk]), "%.1f") : "n/a", f(med(xrss[k]), "%.1f"), f(med(cc[k]), "%.1f"), (nt ? nt : "-")
        }
    }' "$TSV")

{
    echo "# make bench: phalanx agent vs wrk / h2load / ab ($STAMP)"
    echo
    echo "- machine: $NCPU CPU ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), kernel $(uname -r), load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- server: nginx $NGX_VER ($(openssl version | awk '{print $1, $2}')), 1 worker pinned to CPU $SERVER_CPU, ECDSA P-256 leaf, TLS 1.2+1.3, session cache + tickets on, https://127.0.0.1/ (600 B) and /big.html (16 KiB)${LT_VER:+; lighttpd $LT_VER (Debian package, unpacked) for ka-h2-lighttpd, pinned to CPU $SERVER_CPU, same page and leaf}"
    echo "- client CPU $CLIENT_CPU: peers under taskset; phalanx = 1 agent (--cpus $CLIENT_CPU); its coordinator and coordctl (taskset) on CPU $COORD_CPU"
    echo "- tools: $(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}'), $(h2load --version | head -n1), ab $(ab -V | sed -n 's/.*Version \([0-9.]*\).*/\1/p'), phalanx $PHX_DESC ($(go version | awk '{print $3}'))"
    echo "- $ROUNDS round(s) of ${SECS}s per tool per row, interleaved peer/phalanx; $CONNS connections; fixed rate = ${RATE_FRACTION} x the peer's closed-loop median, rounded down to a multiple of $CONNS; **medians** over rounds"
    echo "- idle before the runs: agent ${idle_agent_pct}% CPU, ${idle_agent_rss} MB RSS; coordinator ${idle_coord_pct}% CPU"
    echo
    echo "$TABLE"
    echo
    if [ -n "$MEM_TABLE" ]; then
        echo "Memory per keep-alive TLS connection (600-byte page, closed loop, one run per count and tool, ascending): peak RSS as in the table (wrk -t1: /usr/bin/time %M; the agent: VmHWM after clear_refs) over the connection count, in KB (1,024 bytes); *above idle* subtracts the agent's RSS at rest (${idle_agent_rss} MB) first. Each run lasts max(${MEM_SECS} s, connections / 500 s); a row at 0 req/s or with an rc completed no request (its handshakes outlasted the run, or the agent was not ready within the coordinator's 30 s): its RSS is that of connections being opened.${MEM_NOTE}"
        echo
        echo "$MEM_TABLE"
        echo
    fi
    if [ -n "$PROFILES" ]; then
        echo "## Agent profiles (BENCH_PROFILE=1)"
        echo
        echo "One extra run per row with the agent's CPU profile (\`go tool pprof -top\`, flat = in the function itself, cum = with its callees) and the objects it allocated during the run (a diff of two allocs snapshots). Full outputs: \`${RAW#"$ROOT"/}/*.top\`, profiles \`*.pprof\` (\`go tool pprof -http=: bin/agent FILE\`)."
        echo "$PROFILES"
    fi
    echo "Columns: *RPS* = achieved requests/s (peer: its own report; phalanx: JSON \`rps\`, completed requests in the window / window). *µs/req* = client CPU (user+sys) / completed requests: peer = the whole peer process (/usr/bin/time); phalanx = the agent process's /proc/PID/stat delta around the whole coordctl run (connection set-up, window and drain), over the window's completed requests. *RSS* = peak: peer /usr/bin/time %M; agent VmHWM after clear_refs (a long-lived Go process keeps heap from earlier runs, so this is never below the agent's current RSS). *server µs/req* = the server's CPU (the nginx worker, or lighttpd for ka-h2-lighttpd; user+sys, /proc/PID/stat around the tool's whole run) / the requests the tool completed: what one request of that client's traffic costs the server (HTTP/2: HPACK decoding, framing); *server ratio* compares phalanx's traffic with the peer's (goal for ka-h2: within 5 % of h2load's). *coordinator CPU %* = the coordinator's CPU over the coordctl call's wall time, % of one core (it shares CPU $CLIENT_CPU with the agent). Peers: ka-h1/ka-h1-16k/short-resumed closed = wrk -t1 (short-resumed with 'Connection: close': wrk resumes TLS sessions); ka-h2 = h2load -m10; short-full = ab (never resumes; wrk and h2load cannot avoid resumption); fixed-rate peer = h2load -D --rps (rate/$CONNS per client) for the keep-alive rows; n/a for short connections (ab and wrk have no rate; h2load 1.52 ignores --rps with 'Connection: close', hangs at the end of such a -D run, and resumes sessions anyway). Notes: phalanx's median RPS over the peer's (closed loop: the client's own speed where the server is not the limit, as against lighttpd; goal for ka-h2-lighttpd: at least 0.9), the server's CPU (% of its core, median; ~100 % means the server, not the client, set the RPS; ka-h2-lighttpd exists to show the client's own limit against a server faster than nginx), then from the phalanx JSON: the share of resumed handshakes (short rows, median), the share of the scheduled sends (issued + unsent) that were missed: started more than 5 ms after their intended time, or never sent (fixed-rate rows, median), in how many rounds phalanx flagged the run client-bound, and each round's errors by kind."
    if [ -n "$CPS_TABLE" ]; then
        echo
        echo "Connection rate ($CPS_RATE new TLS connections/s for ${SECS}s, one request each, closed by the client; medians over rounds): h2load -r (a client per connection, rate/100 every 10 ms) vs phalanx --cps --curves X25519 (the group h2load's OpenSSL offers; Go's default also sends an ML-KEM-768 key share); *µs/conn* = client CPU / connections (peer: /usr/bin/time of h2load over its connections; phalanx: the agent's CPU around the coordctl call over the window's connections); *server µs/conn* = the nginx worker's CPU per connection; the 70 % row runs phalanx --resume-ratio 0.7 beside the same h2load full-handshake runs. Per round: \`${RES#"$ROOT"/}/cps-rounds.tsv\`."
        echo
        echo "$CPS_TABLE"
    fi
    if [ -n "$LATENESS_TABLE" ]; then
        echo
        echo "-R sweep with send lateness (open loop, keep-alive, 600-byte page, $CONNS connections, ${SECS}s per run, h2load --rps (rate / $CONNS per client) and phalanx -R interleaved; medians over rounds; the last row of each protocol is the ka-h1 / ka-h2 fixed-rate row when it ran): µs/req as above; send lateness = actual send − intended time, from phalanx's JSON \`send_lateness_us\`; latency p50 − service time p50 is what the tool adds to the latency a user reads; timer wake-up = cyclictest's latency (rt-tests: a thread at normal priority on the client CPU sleeping on the kernel's high-resolution timer for the mean interval between sends, 1 s / rate, ${SECS}s) in the same round: the machine's own floor for a sender that sleeps between sends; clock alone = \`BenchmarkClockAlone\` (internal/engine): the agent's own clock (a timerfd waited on through the Go netpoller) for the same interval, with no connection and no request, on the client CPU, in the same round: the floor of the agent's send lateness, the same wake-up without the agent's work around it."
        echo
        echo "$LATENESS_TABLE"
        echo
        echo "${C1_LINE%;}"
    fi
    echo
    echo "Raw outputs, exact commands and the per-run TSV: \`${RES#"$ROOT"/}/\`."
} > "$REPORT"

echo
cat "$REPORT"
echo
log "report: $REPORT"

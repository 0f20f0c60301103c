#!/bin/bash
# rss-session.sh SERVER CLIENT plain|mg N PORT [VAR=value ...]
#
# RSS per resident session (issue 29; docs/benchmarks.md, "Memory per
# resident session: the collector's default"): starts one server — the
# plain go-sdk server (SERVER bench --serve-baseline) or a dev node
# (SERVER dev, SQLite in a temporary directory, the demo pack, no rate
# limit) — with the environment given (none: the defaults a user runs),
# creates N sessions with CLIENT bench --scenario scale (16 workers), and
# prints the server's VmRSS before, right after, and 10, 30 and 60 s
# after the creations, the growth per session right after and at 60 s,
# and the server's CPU (utime+stime) per created session.
# SKIP_SETTLE=1 skips the waits (CPU runs).
set -u
S=$1; C=$2; KIND=$3; N=$4; PORT=$5; shift 5
D=$(mktemp -d /tmp/rss-session.XXXX)
TOK=benchtoken-0123456789abcdef
if [ "$KIND" = plain ]; then
  env "$@" "$S" bench --serve-baseline 127.0.0.1:$PORT > $D/server.log 2>&1 &
else
  env "$@" "$S" dev --data $D/data --http 127.0.0.1:$PORT --grpc "" --rate-limit 0 --tools demo --token $TOK > $D/server.log 2>&1 &
fi
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && break; sleep 0.5; done
sleep 2 # the listener answers before the node logged ready
rss() { awk '/VmRSS/{print $2}' /proc/$PID/status; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
R0=$(rss); C0=$(cpu); T0=$(date +%s.%N)
"$C" bench --url http://127.0.0.1:$PORT/mcp --token $TOK --scenario scale --scale-sessions $N \
  --concurrency 16 --duration 1ms --progress=false > $D/bench.log 2>&1
T1=$(date +%s.%N); C1=$(cpu); R1=$(rss)
if [ "${SKIP_SETTLE:-}" = 1 ]; then R10=$R1; R30=$R1; R60=$R1
else sleep 10; R10=$(rss); sleep 20; R30=$(rss); sleep 30; R60=$(rss); fi
per() { echo "scale=1; ($1-$R0)*1024/$N/1000" | bc; }
echo "$KIND N=$N rssKB before=$R0 after=$R1 +10s=$R10 +30s=$R30 +60s=$R60" \
  "perSessKB_after=$(per $R1) perSessKB_60s=$(per $R60)" \
  "cpu_ms_per_sess=$(echo "scale=3; ($C1-$C0)*1000/$(getconf CLK_TCK)/$N" | bc)" \
  "wall_s=$(echo "$T1-$T0" | bc) env=$* dir=$D"
grep -i "garbage collector" $D/server.log | head -1

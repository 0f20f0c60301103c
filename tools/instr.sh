#!/usr/bin/env bash
# instr.sh: instructions per operation of a Go benchmark, counted by
# valgrind's callgrind (a count that does not depend on the machine's load,
# unlike CPU time). It runs the benchmark with N and with 2N operations,
# same binary, same flags, and reports
#
#   instructions per op = (Ir(2N) - Ir(N)) / N
#
# so everything the two runs share (process start, the benchmark's setup,
# testing's N=1 probe run) cancels. Each pair is run RUNS times; the spread
# of the per-op figures is printed beside their median.
#
# Usage:
#   tools/instr.sh [-n N] [-r RUNS] [-k] [-o DIR] PKG_OR_TEST_BINARY BENCH_REGEX
#
#   PKG_OR_TEST_BINARY  a package (./gateway: built with `go test -c`) or a
#                       test binary built already (reuse it across variants)
#   BENCH_REGEX         -test.bench's pattern; name ONE benchmark, e.g.
#                       '^BenchmarkToolCallTracing$/^on$/^sequential$'
#                       (each slash-separated part is matched separately)
#   -n N                operations of the short run (default 100)
#   -r RUNS             pairs of runs (default 2)
#   -k                  keep the callgrind outputs (for callgrind_annotate
#                       --inclusive=yes DIR/*.out) and the logs in DIR
#   -o DIR              where to put them (default: a temporary directory)
#
# The environment of the benchmark: GOMAXPROCS=1 (one P: no work stealing
# between Ps; valgrind runs one thread at a time anyway), GOGC=100 (a
# fixed collector pace; GC work is counted, as it is part of an
# allocation's cost), GODEBUG=asyncpreemptoff=1 (no preemption signals)
# and cpu.rdtscp=off (valgrind 3.19 cannot decode RDTSCP, which Go's
# runtime.cputicks uses), MCPGRAIN_TEST_START_TIMEOUT=10m (an in-process
# node's start under valgrind). Override any of them by setting it.
#
# Instructions are not CPU time: they leave out cache misses, branch
# mispredictions, the kernel's side of system calls and time spent
# waiting; they count spinning (the scheduler looking for work) and
# background timers, which grow with the run's wall time under valgrind
# (≈ 50× slower). docs/benchmarks.md ("Instructions per operation") has
# what the counts of the tracing benchmarks showed.
set -euo pipefail

n=100 runs=2 keep= dir=
while getopts "n:r:ko:" opt; do
	case $opt in
	n) n=$OPTARG ;;
	r) runs=$OPTARG ;;
	k) keep=1 ;;
	o) dir=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2
	exit 2
fi
target=$1 bench=$2
command -v valgrind >/dev/null || { echo "instr.sh: valgrind not found" >&2; exit 1; }

if [ -z "$dir" ]; then
	dir=$(mktemp -d /tmp/instr.XXXXXX)
	[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"

bin=$target
if [ ! -f "$target" ] || [ ! -x "$target" ]; then
	bin=$dir/bench.test
	echo "building $target ..." >&2
	go test -c -o "$bin" "$target"
fi

export GOMAXPROCS=${GOMAXPROCS:-1} GOGC=${GOGC:-100}
export GODEBUG=${GODEBUG:-asyncpreemptoff=1,cpu.rdtscp=off}
# mcpgrain's in-process test nodes wait 20s for a start: not enough here.
export MCPGRAIN_TEST_START_TIMEOUT=${MCPGRAIN_TEST_START_TIMEOUT:-10m}

# ir OPS TAG: the instructions of one run of the benchmark with OPS
# operations (callgrind's total over every thread). A run that has not
# ended after INSTR_TIMEOUT seconds (default 300) is killed and run again,
# twice at most: a Go program under valgrind now and then sleeps for good
# (every thread in a futex wait: a lost wakeup; tools/README.md).
ir() {
	local out=$dir/$2.out log=$dir/$2.log try rc
	for try in 1 2 3; do
		rc=0
		timeout -s KILL "${INSTR_TIMEOUT:-300}" valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" \
			-test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" >"$log" 2>&1 || rc=$?
		[ "$rc" -eq 137 ] || break
		echo "instr.sh: $2 hung (try $try), killed after ${INSTR_TIMEOUT:-300}s" >&2
	done
	[ "$rc" -eq 0 ] || { echo "instr.sh: run failed ($rc), see $log" >&2; tail -20 "$log" >&2; exit 1; }
	grep -q '^ok\|^PASS' "$log" || { echo "instr.sh: no PASS in $log" >&2; exit 1; }
	grep -c "^Benchmark" "$log" | grep -qx 1 ||
		{ echo "instr.sh: the pattern must select exactly one benchmark (see $log)" >&2; exit 1; }
	sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$log"
}

per=()
printf '%-4s %16s %16s %12s\n' run "Ir(N=$n)" "Ir(2N=$((2 * n)))" "Ir/op" >&2
for r in $(seq 1 "$runs"); do
	a=$(ir "$n" "r$r-n$n")
	b=$(ir "$((2 * n))" "r$r-n$((2 * n))")
	p=$(( (b - a) / n ))
	per+=("$p")
	printf '%-4s %16s %16s %12s\n' "$r" "$a" "$b" "$p" >&2
done
sorted=$(printf '%s\n' "${per[@]}" | sort -n)
lo=$(echo "$sorted" | head -1) hi=$(echo "$sorted" | tail -1)
med=$(echo "$sorted" | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2))}')
spread=$(awk -v lo="$lo" -v hi="$hi" -v m="$med" 'BEGIN {printf "%.2f", m ? 100*(hi-lo)/m : 0}')
echo "$bench: $med instructions/op (median of $runs; min $lo, max $hi, spread $spread %)"
[ -z "$keep" ] || echo "callgrind outputs and logs: $dir" >&2

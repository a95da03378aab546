#!/usr/bin/env bash
# By hand, not in CI: runs comm_connect_kill_test's TcpMeshBootstrapKill
# (victim killed while the TCP mesh forms) N times under ASan with leak
# checking on and NO suppressions, and counts the runs that fail. This is
# where a LeakSanitizer report of Gloo's pair exceptions used to show in
# about 1 run of 10 (docs/testing.md, CHANGELOG). Each failing run's output
# is kept under the log folder.
#
#   tests/comm/connect_kill_leak_loop.sh [build-dir (_build-asan)] [N (60)]
set -uo pipefail
build=${1:-_build-asan}
n=${2:-60}
bin=$build/tests/comm/comm_connect_kill_test
[ -x "$bin" ] || { echo "no $bin: build comm_connect_kill_test with -DHB_SANITIZE=address,undefined" >&2; exit 2; }
logs=$(mktemp -d /tmp/hb_connect_kill_leak.XXXXXX)
failed=0
leaked=0
for i in $(seq 1 "$n"); do
  # fast_unwind_on_malloc=0: libgloo has no frame pointers, so only the
  # slow unwinder shows the Gloo frames of an allocation.
  if ! ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=64 \
       LSAN_OPTIONS= UBSAN_OPTIONS=print_stacktrace=1 \
       "$bin" --gtest_filter='*TcpMeshBootstrapKill*' > "$logs/run.$i" 2>&1; then
    failed=$((failed + 1))
    grep -q "LeakSanitizer" "$logs/run.$i" && leaked=$((leaked + 1))
    echo "run $i failed: $logs/run.$i"
  else
    rm -f "$logs/run.$i"
  fi
done
echo "connect_kill leak loop: $failed of $n runs failed ($leaked with a LeakSanitizer report); logs in $logs"
[ "$failed" -eq 0 ]

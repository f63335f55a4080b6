#!/usr/bin/env bash
# Where node 1's event loop thread blocks under load (docs/benchmarks.md, "Where the loop
# blocked"): a fresh `ringlog dev` quorum (128 MiB segments), `perf append` with 32 clients ×
# 64 × 1 KiB, acks=all, on a topic of PARTITIONS partitions, and `perf record -e
# sched:sched_switch -g` of node 1's main thread for SECS seconds after 5 s of load. Prints the
# load's JSON summary, the switches out of the thread (and how many were preemptions), and the
# other switches grouped by their first four kernel frames past the scheduler: `epoll_wait` is
# the loop's idle wait, anything else is the loop blocked in a system call. Needs `perf`
# (Debian's linux-perf) and root (or perf_event_paranoid <= 1).
#
#   scripts/offcpu-loop.sh BINARY PARTITIONS [SECS]     (FOLDER=/tmp/offcpu-loop PORT=19293)
set -euo pipefail
bin="$1"; parts="$2"; secs="${3:-5}"
d="${FOLDER:-/tmp/offcpu-loop}"; port="${PORT:-19293}"; rm -rf "$d"; mkdir -p "$d"
setsid "$bin" dev --data-dir "$d"/nodes --base-port $port --segment-bytes 134217728 > "$d"/dev.log 2>&1 &
dev=$!
for _ in $(seq 1 100); do grep -q '^leader:' "$d"/dev.log 2>/dev/null && break; sleep 0.1; done
"$bin" perf append --bootstrap 127.0.0.1:$port --clients 32 --batch-records 64 --partitions "$parts" \
  --record-size 1024 --warmup-secs 3 --duration-secs $((secs+4)) --json > "$d"/perf.json 2>"$d"/perf.err &
perfpid=$!
sleep 5
pid=$(cat "$d"/nodes/node-1.pid)
perf record -e sched:sched_switch -g -t $pid -o "$d"/perf.data -- sleep "$secs" 2>/dev/null >/dev/null
wait $perfpid || true
kill -TERM $dev; wait $dev 2>/dev/null || true
cat "$d"/perf.json; echo
perf script -i "$d"/perf.data 2>/dev/null > "$d"/script.txt
python3 - "$d"/script.txt <<'PY'
import sys, collections, re
blocks = open(sys.argv[1]).read().split("\n\n")
c = collections.Counter(); total = 0; preempt = 0
skip = re.compile(r"schedule|__schedule|preempt|finish_task_switch|__traceiter|entry_SYSCALL|do_syscall|syscall_exit|__x64_sys|io_schedule|rwsem_down|__mutex|mutex_lock|down_read|down_write|wait_for_completion|schedule_timeout|__cond_resched|__wait_on|bit_wait|out_of_line_wait|folio_wait|__folio_lock|wait_on_page|__sched_text|_raw_spin")
for b in blocks:
    lines = [l for l in b.strip().split("\n") if l]
    if not lines: continue
    head = lines[0]
    m = re.search(r"prev_state=(\S+)", head)
    if not m: continue
    total += 1
    if m.group(1) in ("R", "R+"):
        preempt += 1; continue
    frames = [l.split()[1] if len(l.split())>1 else l for l in lines[1:]]
    key = [f for f in frames if not skip.search(f)][:4]
    c[" <- ".join(key)] += 1
print("switches", total, "preempted", preempt)
for k, v in c.most_common(25): print(v, k)
PY

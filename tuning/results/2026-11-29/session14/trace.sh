#!/usr/bin/env bash
# trace.sh BIN OUT [loadgen mix args]: standalone on CPU 1; 1 s of io_uring + sched tracepoints mid-run.
source /work/main/tuning/lib.sh
B=$1 O=$2; shift 2
SERVER_TASKSET=(taskset -c 1)
RINGKEEPER=$B start_rk a
sleep 2
( sleep 5; perf record -e io_uring:io_uring_submit_req -e io_uring:io_uring_complete -e syscalls:sys_enter_io_uring_enter -e syscalls:sys_exit_io_uring_enter -e sched:sched_switch -e block:block_rq_issue -e block:block_rq_complete -a -o "$O" -- sleep 1 >/dev/null 2>&1 ) &
taskset -c 0 "$LOADGEN" mix --target "$ADDR" --server-pid $PID "$@" | grep "^127"
wait

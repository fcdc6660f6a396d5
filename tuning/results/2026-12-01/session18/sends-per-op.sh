#!/bin/bash
# sends.sh BIN READS: standalone on CPU1, loadgen on CPU0; perf stat send/recv counts over 2 s
BIN=$1; READS=${2:-0}
d=$(mktemp -d /tmp/prof.XXXX); mkdir -p $d/data
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' $d $port > $d/zoo.cfg
taskset -c 1 $BIN --config $d/zoo.cfg > $d/log 2>&1 & P=$!
sleep 1.5
taskset -c 0 /work/main/target/release/ringkeeper-loadgen mix --target 127.0.0.1:$port --reads $READS --sessions 32 --outstanding 8 --warmup-s 1 --duration-s 5 --server-pid $P > $d/lg.txt 2>&1 & L=$!
sleep 3
perf stat -x, -e raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_pwrite64,syscalls:sys_enter_read,syscalls:sys_enter_futex,io_uring:io_uring_submit_req,sock:sock_send_length,sock:sock_recv_length,tcp:tcp_sendmsg_locked,sock:sk_data_ready,io_uring:io_uring_complete -p $P -- sleep 2 2> $d/stat.txt >/dev/null
wait $L
ops=$(awk 'NR==2{print $3}' $d/lg.txt)
awk -F, -v ops=$ops '{printf "%s %.3f/op\n", $3, $1/(ops*2)}' $d/stat.txt
echo "ops/s $ops"
kill $P; wait $P 2>/dev/null; rm -rf $d

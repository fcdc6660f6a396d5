#!/bin/bash
# sa-ab.sh A B PAIRS: standalone A and B alternating (A first in each pair), one rtt-client session on CPU 1 beside the server, 1000 of each op
A=$1; B=$2; PAIRS=${3:-5}
run() {
  local bin=$1 d port P
  d=$(mktemp -d /tmp/saab.XXXX); mkdir -p $d/data
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' $d $port > $d/zoo.cfg
  taskset -c 1 $bin --config $d/zoo.cfg > $d/log 2>&1 & P=$!
  for i in $(seq 50); do echo srvr | timeout 1 nc -q1 127.0.0.1 $port 2>/dev/null | grep -q Mode && break; sleep 0.1; done
  taskset -c 1 /tmp/s17/rtt-client 127.0.0.1 $port 20 1024 > /dev/null
  sleep 3
  echo "$(basename $bin) $(taskset -c 1 timeout 120 /tmp/s17/rtt-client 127.0.0.1 $port 1000 1024 | grep -E "create|set" | awk '{printf "%s p50 %s  ", $2, $4}')"
  kill $P; wait $P 2>/dev/null; rm -rf $d
}
for i in $(seq $PAIRS); do run $A; run $B; done

#!/usr/bin/env bash
# Figure 5 for ensembles: a 3-server ringkeeper ensemble and a 3-server
# Apache ZooKeeper ensemble (each member on its own 127.0.0.x address, its
# own data dir, fsync on), measured by the same client in one run,
# alternating targets point by point; sessions are spread over the three
# members, so reads are served by every member and writes go through the
# leader. Extra arguments go to the loadgen, e.g.:
#   tuning/ensemble.sh --reads 0,50,90,100 --duration-s 5 --rounds 3
# Both ensembles run on the same cores as the client: on a 2-core machine
# this measures CPU cost per operation more than scaling.
source "$(dirname "$0")/lib.sh"
build

start_ensemble rk rk 10 3 2000; RK=$ENSEMBLE
start_ensemble zk zk 20 3 2000; ZK=$ENSEMBLE
"$LOADGEN" compare --target rk="$RK" --target zk="$ZK" \
    --warmup-s 5 "$@" \
    --json "$OUT/ensemble.json" --csv "$OUT/ensemble.csv" --plot "$OUT/ensemble.svg"

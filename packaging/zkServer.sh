#!/usr/bin/env bash
# ringkeeper's zkServer.sh: Apache ZooKeeper 3.8's bin/zkServer.sh (and its
# zkEnv.sh) for ringkeeper, so that runbooks written for ZooKeeper work:
#
#   zkServer.sh [--config <conf-dir>] {start|start-foreground|stop|version|restart|status|print-cmd} [config]
#
# The same commands, environment (ZOOCFGDIR, ZOOCFG, ZOO_LOG_DIR,
# ZOOPIDFILE, ZOO_NOEXEC, $ZOOCFGDIR/zookeeper-env.sh), output lines and
# exit statuses as ZooKeeper's script; the pid file is dataDir's
# zookeeper_server.pid, and `status` asks the server's `srvr` four-letter
# word for its Mode. Installed as /usr/share/ringkeeper/bin/zkServer.sh and
# /usr/bin/ringkeeper-server. Differences:
#   - no JVM: no JMX lines, JVMFLAGS and friends are ignored; ZOO_LOG_DIR
#     holds ringkeeper-$USER-server-$HOSTNAME.out (the server's stdout and
#     stderr) when started in the background;
#   - started as root, the server runs as RINGKEEPER_USER (default
#     ringkeeper, when that user exists; RINGKEEPER_USER=root keeps root),
#     so its files in dataDir stay the service's; and with the systemd
#     unit's limits where they can be raised (RINGKEEPER_NOFILE, default
#     1048576, and unlimited locked memory; else soft limits = hard ones);
#   - stop waits (up to RINGKEEPER_STOP_TIMEOUT seconds, default 30) until
#     the server has exited, and restart needs no sleep in between;
#   - status over TLS (secureClientPort only) uses `openssl s_client`.
# The binary is RINGKEEPER (default /usr/bin/ringkeeper, else ringkeeper
# from PATH).

# zkEnv.sh: the configuration directory, its env file, the config file and
# the log directory.
if [ $# -gt 1 ]; then
    if [ "--config" = "$1" ]; then
        shift
        confdir=$1
        shift
        ZOOCFGDIR=$confdir
    fi
fi

if [ "x$ZOOCFGDIR" = "x" ]; then
    ZOOCFGDIR=/etc/ringkeeper
fi

if [ -f "${ZOOCFGDIR}/zookeeper-env.sh" ]; then
    . "${ZOOCFGDIR}/zookeeper-env.sh"
fi

if [ "x$ZOOCFG" = "x" ]; then
    ZOOCFG="zoo.cfg"
fi
_ZOOCFG_NAME=$ZOOCFG

ZOOCFG="$ZOOCFGDIR/$ZOOCFG"

if [ "x${ZOO_LOG_DIR}" = "x" ]; then
    ZOO_LOG_DIR=/var/log/ringkeeper
fi

if [ "x$RINGKEEPER" = "x" ]; then
    if [ -x /usr/bin/ringkeeper ]; then
        RINGKEEPER=/usr/bin/ringkeeper
    else
        RINGKEEPER=$(command -v ringkeeper || echo /usr/bin/ringkeeper)
    fi
fi

# zkServer.sh proper.
if [ "x$2" != "x" ]; then
    ZOOCFG="$ZOOCFGDIR/$2"
fi

# if we give a more complicated path to the config, don't screw around in $ZOOCFGDIR
if [ "x$2" != "x" ] && [ "x$(dirname "$ZOOCFG")" != "x$ZOOCFGDIR" ]; then
    ZOOCFG="$2"
fi

echo "Using config: $ZOOCFG" >&2

GREP=grep
ZOO_DATADIR="$($GREP "^[[:space:]]*dataDir" "$ZOOCFG" | sed -e 's/.*=//')"
ZOO_DATADIR="$(echo -e "${ZOO_DATADIR}" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')"
ZOO_DATALOGDIR="$($GREP "^[[:space:]]*dataLogDir" "$ZOOCFG" | sed -e 's/.*=//')"

# iff autocreate is turned off and the datadirs don't exist fail
# immediately as we can't create the PID file, etc..., anyway.
if [ -n "$ZOO_DATADIR_AUTOCREATE_DISABLE" ]; then
    if [ ! -d "$ZOO_DATADIR" ]; then
        echo "ZooKeeper data directory is missing at $ZOO_DATADIR fix the path or run initialize"
        exit 1
    fi

    if [ -n "$ZOO_DATALOGDIR" ] && [ ! -d "$ZOO_DATALOGDIR" ]; then
        echo "ZooKeeper txnlog directory is missing at $ZOO_DATALOGDIR fix the path or run initialize"
        exit 1
    fi
fi

# Started by root: the service's user and limits (as the systemd unit).
RUN_AS=()
if [ "$(id -u)" = 0 ]; then
    RINGKEEPER_USER=${RINGKEEPER_USER-ringkeeper}
    if [ -n "$RINGKEEPER_USER" ] && [ "$RINGKEEPER_USER" != root ] &&
        getent passwd "$RINGKEEPER_USER" >/dev/null 2>&1; then
        if command -v setpriv >/dev/null 2>&1; then
            RUN_AS=(setpriv "--reuid=$RINGKEEPER_USER" "--regid=$RINGKEEPER_USER" --init-groups --)
        else
            RUN_AS=(runuser -u "$RINGKEEPER_USER" --)
        fi
        # The server must be able to write dataDir (and dataLogDir): they
        # are created for it when missing, as it would create them.
        for d in "$ZOO_DATADIR" "$ZOO_DATALOGDIR"; do
            if [ -n "$d" ] && [ ! -e "$d" ]; then
                mkdir -p "$d" && chown "$RINGKEEPER_USER:" "$d"
            fi
        done
    fi
fi
# The unit's limits (LimitNOFILE, LimitMEMLOCK=infinity) where this user may
# raise them (root with CAP_SYS_RESOURCE), else the soft limits up to the
# hard ones.
case $1 in
start | start-foreground | restart)
    ulimit -n "${RINGKEEPER_NOFILE:-1048576}" 2>/dev/null || ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
    ulimit -l unlimited 2>/dev/null || ulimit -Sl "$(ulimit -Hl)" 2>/dev/null || true
    ;;
esac

if [ -z "$ZOOPIDFILE" ]; then
    if [ ! -d "$ZOO_DATADIR" ]; then
        mkdir -p "$ZOO_DATADIR"
    fi
    ZOOPIDFILE="$ZOO_DATADIR/zookeeper_server.pid"
else
    # ensure it exists, otw stop will fail
    mkdir -p "$(dirname "$ZOOPIDFILE")"
fi

if [ ! -w "$ZOO_LOG_DIR" ]; then
    mkdir -p "$ZOO_LOG_DIR"
fi

_ZOO_DAEMON_OUT="$ZOO_LOG_DIR/ringkeeper-${USER:-$(id -un)}-server-$HOSTNAME.out"

# Whether the process `pid` runs (a zombie does not).
running() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state=$(sed -e 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" != Z ]
}

# The srvr four-letter word's answer from address $1, port $2 ($3: TLS).
srvr() {
    local host=$1 port=$2
    case "$host" in
    localhost) host=127.0.0.1 ;;
    esac
    if [ "$3" = true ]; then
        printf srvr | timeout 10 openssl s_client -quiet -connect "$host:$port" 2>/dev/null
    else
        timeout 10 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf srvr >&3 && cat <&3' "$host" "$port" 2>/dev/null
    fi
}

case $1 in
start)
    echo -n "Starting zookeeper ... "
    if [ -f "$ZOOPIDFILE" ]; then
        if kill -0 $(cat "$ZOOPIDFILE") >/dev/null 2>&1; then
            echo $command already running as process $(cat "$ZOOPIDFILE").
            exit 1
        fi
    fi
    nohup "${RUN_AS[@]}" "$RINGKEEPER" --config "$ZOOCFG" >"$_ZOO_DAEMON_OUT" 2>&1 </dev/null &
    if [ $? -eq 0 ]; then
        if /bin/echo -n $! >"$ZOOPIDFILE"; then
            sleep 1
            pid=$(cat "${ZOOPIDFILE}")
            if running "${pid}"; then
                echo STARTED
            else
                echo FAILED TO START
                exit 1
            fi
        else
            echo FAILED TO WRITE PID
            exit 1
        fi
    else
        echo SERVER DID NOT START
        exit 1
    fi
    ;;
start-foreground)
    ZOO_CMD=(exec "${RUN_AS[@]}" "$RINGKEEPER")
    if [ "${ZOO_NOEXEC}" != "" ]; then
        ZOO_CMD=("${RUN_AS[@]}" "$RINGKEEPER")
    fi
    "${ZOO_CMD[@]}" --config "$ZOOCFG"
    ;;
print-cmd)
    echo "${RUN_AS[*]}${RUN_AS[*]:+ }\"$RINGKEEPER\" --config \"$ZOOCFG\" > \"$_ZOO_DAEMON_OUT\" 2>&1 < /dev/null"
    ;;
stop)
    echo -n "Stopping zookeeper ... "
    if [ ! -f "$ZOOPIDFILE" ]; then
        echo "no zookeeper to stop (could not find file $ZOOPIDFILE)"
    else
        pid=$(cat "$ZOOPIDFILE")
        kill $pid
        rm "$ZOOPIDFILE"
        # ZooKeeper sleeps one second; this waits until the server is gone
        # (its port and data directory lock free for a start after it).
        waited=0
        limit=$((${RINGKEEPER_STOP_TIMEOUT:-30} * 10))
        while [ $waited -lt $limit ] && running "$pid"; do
            sleep 0.1
            waited=$((waited + 1))
        done
        echo STOPPED
    fi
    exit 0
    ;;
version)
    "$RINGKEEPER" --version 2>/dev/null
    ;;
restart)
    shift
    # ZOOCFGDIR and ZOOCFG as this run found them (also from --config).
    ZOOCFGDIR="$ZOOCFGDIR" ZOOCFG="$_ZOOCFG_NAME" "$0" stop ${@}
    ZOOCFGDIR="$ZOOCFGDIR" ZOOCFG="$_ZOOCFG_NAME" "$0" start ${@}
    ;;
status)
    # -q is necessary on some versions of linux where nc returns too quickly, and no stat result is output
    isSSL="false"
    clientPortAddress=$($GREP "^[[:space:]]*clientPortAddress[^[:alpha:]]" "$ZOOCFG" | sed -e 's/.*=//')
    if ! [ $clientPortAddress ]; then
        clientPortAddress="localhost"
    fi
    clientPort=$($GREP "^[[:space:]]*clientPort[^[:alpha:]]" "$ZOOCFG" | sed -e 's/.*=//')
    if ! [[ "$clientPort" =~ ^[0-9]+$ ]]; then
        dataDir=$($GREP "^[[:space:]]*dataDir" "$ZOOCFG" | sed -e 's/.*=//')
        myid=$(cat "$dataDir/myid" 2>/dev/null)
        if ! [[ "$myid" =~ ^[0-9]+$ ]]; then
            echo "myid could not be determined, will not able to locate clientPort in the server configs."
        else
            clientPortAndAddress=$($GREP "^[[:space:]]*server.$myid=.*;.*" "$ZOOCFG" | sed -e 's/.*=//' | sed -e 's/.*;//')
            if [ ! "$clientPortAndAddress" ]; then
                echo "Client port not found in static config file. Looking in dynamic config file."
                dynamicConfigFile=$($GREP "^[[:space:]]*dynamicConfigFile" "$ZOOCFG" | sed -e 's/.*=//')
                clientPortAndAddress=$($GREP "^[[:space:]]*server.$myid=.*;.*" "$dynamicConfigFile" | sed -e 's/.*=//' | sed -e 's/.*;//')
            fi
            if [ ! "$clientPortAndAddress" ]; then
                echo "Client port not found in the server configs"
            else
                if [[ "$clientPortAndAddress" =~ ^.*:[0-9]+ ]]; then
                    if [[ "$clientPortAndAddress" =~ \[.*\]:[0-9]+ ]]; then
                        # Extracts address from address:port for example extracts 127::1 from "[127::1]:2181"
                        clientPortAddress=$(echo "$clientPortAndAddress" | sed -e 's|\[||' | sed -e 's|\]:.*||')
                    else
                        clientPortAddress=$(echo "$clientPortAndAddress" | sed -e 's/:.*//')
                    fi
                fi
                clientPort=$(echo "$clientPortAndAddress" | sed -e 's/.*://')
            fi
        fi
    fi
    if [ ! "$clientPort" ]; then
        echo "Client port not found. Looking for secureClientPort in the static config."
        secureClientPort=$($GREP "^[[:space:]]*secureClientPort[^[:alpha:]]" "$ZOOCFG" | sed -e 's/.*=//')
        if [ "$secureClientPort" ]; then
            isSSL="true"
            clientPort=$secureClientPort
            clientPortAddress=$($GREP "^[[:space:]]*secureClientPortAddress[^[:alpha:]]" "$ZOOCFG" | sed -e 's/.*=//')
            if ! [ $clientPortAddress ]; then
                clientPortAddress="localhost"
            fi
        else
            echo "Unable to find either secure or unsecure client port in any configs. Terminating."
            exit 1
        fi
    fi
    echo "Client port found: $clientPort. Client address: $clientPortAddress. Client SSL: $isSSL."
    STAT=$(srvr "$clientPortAddress" "$clientPort" "$isSSL" | $GREP Mode)
    if [ "x$STAT" = "x" ]; then
        if [ "$isSSL" = "true" ]; then
            echo " "
            echo "Note: We used secureClientPort ($secureClientPort) to establish connection, but we failed. The 'status'"
            echo "  command establishes a client connection to the server to execute diagnostic commands. This script"
            echo "  connects with 'openssl s_client' and no client certificate: a server that requires one (the"
            echo "  default, ssl.clientAuth=need) refuses it; ask it with a client certificate instead, e.g."
            echo "  printf srvr | openssl s_client -quiet -connect host:port -cert client.pem -key client.key"
            echo " "
        fi
        echo "Error contacting service. It is probably not running."
        exit 1
    else
        echo $STAT
        exit 0
    fi
    ;;
*)
    echo "Usage: $0 [--config <conf-dir>] {start|start-foreground|stop|version|restart|status|print-cmd}" >&2
    ;;
esac

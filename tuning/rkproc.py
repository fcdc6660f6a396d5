"""What the tuning/*.py measurements share: start a server binary on a free
loopback port with a temporary dataDir (killed on exit), read its memory and
descriptors from /proc, and the few jute frames they send by hand."""
import contextlib, os, socket, struct, subprocess, tempfile, time

# One ACL entry: perms ALL (31), world:anyone.
OPEN_ACL = struct.pack(">ii", 1, 31) + struct.pack(">i", 5) + b"world" + struct.pack(">i", 6) + b"anyone"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def frame(b):
    return struct.pack(">i", len(b)) + b


def pbuf(b):
    """A jute buffer (length-prefixed bytes); a str is encoded as UTF-8."""
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">i", len(b)) + b


def connect_request(timeout_ms=30000):
    # protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly
    return frame(struct.pack(">iqiqi16s?", 0, 0, timeout_ms, 0, 16, b"\0" * 16, False))


def read_exact(s, n):
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise EOFError("server closed")
        out += got
    return out


def read_frame(s):
    return read_exact(s, struct.unpack(">i", read_exact(s, 4))[0])


def proc_status(pid):
    """(open descriptors, VmRSS in KiB) of process `pid`."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return fds, rss


@contextlib.contextmanager
def server(binary, prefix, extra_cfg=""):
    """Runs `binary` on a fresh zoo.cfg (127.0.0.1, free port, forceSync=no,
    every four-letter word, no per-address connection limit, plus
    `extra_cfg` lines) until it accepts connections; yields (process, port,
    its temporary directory) and kills it by pid on the way out."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    cfg = os.path.join(tmp, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(f"tickTime=2000\ndataDir={tmp}/data\nclientPort={port}\n"
                "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nforceSync=no\n"
                f"4lw.commands.whitelist=*\n{extra_cfg}\n")
    os.makedirs(f"{tmp}/data")
    proc = subprocess.Popen([binary, "--config", cfg], stdout=subprocess.DEVNULL,
                            stderr=open(f"{tmp}/server.log", "w"),
                            env=dict(os.environ, RUST_LOG="warn"))
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield proc, port, tmp
    finally:
        proc.kill()
        proc.wait()

//! Test harness: starts ringkeeper or Apache ZooKeeper (Debian's `zookeeper`
//! package) on a free loopback port with a temporary data dir, waits until it
//! answers, and kills it by pid when dropped.
#![allow(dead_code)]

pub mod bounded;
pub mod cluster;
pub mod curator;
pub mod ensemble_client;
pub mod prom;
pub mod raw;
pub mod raw_fallible;
pub mod restart;
pub mod small_tmpfs;
pub mod transcript;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";
pub const ZK_CONF_DIR: &str = "/etc/zookeeper/conf";
/// Netty's codec classes, which Debian's zookeeper.jar manifest leaves off
/// its Class-Path: NettyServerCnxnFactory (TLS) needs them.
pub const NETTY_CODEC_JAR: &str = "/usr/share/java/netty-codec.jar";
/// The servlet API, which Debian's zookeeper.jar manifest leaves off its
/// Class-Path while listing Jetty: without it ZooKeeper's AdminServer does
/// not load (NoClassDefFoundError: javax/servlet/Servlet) and the server
/// runs without it. Only matters where a test turns the AdminServer on.
pub const SERVLET_API_JAR: &str = "/usr/share/java/servlet-api.jar";
pub const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A port nothing listens on, on any address, never handed out twice in
/// one test binary (tests that kill and restart a server on its port leave
/// it free for a moment). It is taken below the kernel's ephemeral range,
/// so no outgoing connection gets it as its source port and no process
/// that binds port 0 (another test's Java, a leftover server) takes it
/// between now and the server's bind; the wildcard bind shows that no
/// socket holds it on 127.0.0.1 or on the 127.0.0.x a member listens on.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u32, ephemeral_low.min(65_536));
    if high > low + 1000 {
        // Each binary starts somewhere else in the range.
        let span = high - low;
        let seed = std::process::id().wrapping_mul(7919) + handed_out.len() as u32 * 13;
        for step in 0..span {
            let port = (low + (seed + step) % span) as u16;
            if !handed_out.contains(&port) && TcpListener::bind(("0.0.0.0", port)).is_ok() {
                handed_out.push(port);
                return port;
            }
        }
    }
    for _ in 0..1000 {
        let port = TcpListener::bind("0.0.0.0:0")
            .expect("bind an ephemeral port")
            .local_addr()
            .unwrap()
            .port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
    panic!("no fresh port in 1000 tries");
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Ringkeeper,
    ZooKeeper,
}

pub struct Server {
    pub flavor: Flavor,
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Server {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Sends a four-letter word and returns the whole answer.
    pub fn four_letter(&self, word: &str) -> String {
        four_letter(self.port, word).unwrap_or_default()
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn four_letter(port: u16, word: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// zoo.cfg lines every server a test starts gets after its own
/// (RK_TEST_EXTRA_CFG, `\n` or `;` between lines): to run the suite on
/// another layout, e.g. `RK_TEST_EXTRA_CFG='ringkeeper.shards=3;
/// ringkeeper.consensusExecutor=own'` (the default on a 4-core host).
/// Apache ZooKeeper takes unknown keys as system properties and ignores
/// ringkeeper.* ones.
pub fn extra_cfg_from_env() -> String {
    std::env::var("RK_TEST_EXTRA_CFG")
        .unwrap_or_default()
        .split([';', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

fn write_cfg(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let extra = format!("{extra}\n{}", extra_cfg_from_env());
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cfg = dir.join("zoo.cfg");
    let text = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
         admin.enableServer=false\n4lw.commands.whitelist=*\n{}\n",
        data.display(),
        port,
        extra
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn wait_ready(mut server: Server) -> Server {
    let start = Instant::now();
    loop {
        if let Ok(out) = four_letter(server.port, "srvr") {
            if out.contains("Mode:") {
                return server;
            }
        }
        if !server.is_running() {
            let log = std::fs::read_to_string(server.dir.path().join("server.log"));
            panic!(
                "{:?} exited before it answered: {}",
                server.flavor,
                log.unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < READY_TIMEOUT,
            "{:?} did not answer srvr within {:?}",
            server.flavor,
            READY_TIMEOUT
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn(flavor: Flavor, extra_cfg: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = write_cfg(dir.path(), port, extra_cfg);
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let mut cmd = match flavor {
        Flavor::Ringkeeper => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ringkeeper"));
            c.arg("--config").arg(&cfg);
            c.env(
                "RUST_LOG",
                std::env::var("RK_TEST_LOG").unwrap_or("warn".into()),
            );
            c
        }
        Flavor::ZooKeeper => {
            assert!(
                Path::new(ZK_JAR).exists(),
                "Apache ZooKeeper is not installed: apt-get install -y zookeeper"
            );
            let mut c = Command::new("java");
            // ZooKeeper reads znode.* (container reaper knobs) only as Java
            // system properties; ringkeeper reads them from zoo.cfg. So it
            // does a system property spelled out in full (zoo.cfg would turn
            // `zookeeper.enforceQuota` into `zookeeper.zookeeper.enforceQuota`;
            // the short `enforceQuota` works in both).
            for line in extra_cfg.lines().map(str::trim) {
                // java.* (the JAAS file's java.security.auth.login.config)
                // is a JVM property too.
                if line.starts_with("znode.")
                    || line.starts_with("zookeeper.")
                    || line.starts_with("java.")
                {
                    c.arg(format!("-D{line}"));
                }
            }
            c.arg(format!("-Dzookeeper.log.dir={}", dir.path().display()))
                .arg("-Xmx512m")
                .arg("-cp")
                .arg(format!(
                    "{ZK_CONF_DIR}:{ZK_JAR}:{NETTY_CODEC_JAR}:{SERVLET_API_JAR}"
                ))
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                .arg(&cfg);
            c
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let child = cmd.spawn().expect("spawn server");
    wait_ready(Server {
        flavor,
        port,
        dir,
        child,
    })
}

pub fn start_ringkeeper(extra_cfg: &str) -> Server {
    spawn(Flavor::Ringkeeper, extra_cfg)
}

pub fn start_zookeeper(extra_cfg: &str) -> Server {
    spawn(Flavor::ZooKeeper, extra_cfg)
}

pub fn start(flavor: Flavor, extra_cfg: &str) -> Server {
    spawn(flavor, extra_cfg)
}

/// Which server the integration tests run against: ringkeeper by default,
/// Apache ZooKeeper with RK_TEST_TARGET=zookeeper (to check the tests
/// themselves against the reference).
pub fn target_flavor() -> Flavor {
    match std::env::var("RK_TEST_TARGET").as_deref() {
        Ok("zookeeper") | Ok("zk") => Flavor::ZooKeeper,
        _ => Flavor::Ringkeeper,
    }
}

pub fn start_target(extra_cfg: &str) -> Server {
    spawn(target_flavor(), extra_cfg)
}

/// Resident set of a process, in kB (0 if unknown).
pub fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

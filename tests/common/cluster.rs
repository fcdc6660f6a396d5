//! Ensembles of real server processes on loopback: member i (1-based)
//! listens on 127.0.0.i (client, quorum and election ports, each free a
//! moment before), with its own data dir and `myid`. ringkeeper or Apache
//! ZooKeeper (the same zoo.cfg), so each test can be checked against the
//! reference. Every process is killed by pid when the cluster is dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, Flavor, NETTY_CODEC_JAR, SERVLET_API_JAR, ZK_CONF_DIR, ZK_JAR};

pub const TICK_MS: u64 = 200;
pub const SYNC_LIMIT: u64 = 5;

pub struct Member {
    pub id: usize,
    /// Which server runs as this member.
    pub flavor: Flavor,
    pub client: SocketAddr,
    pub quorum: SocketAddr,
    pub election: SocketAddr,
    pub cfg: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    stopped: bool,
    /// The cgroup (v2) this member runs in, relative to the cgroup root
    /// (see `start_in_cgroups`).
    cgroup: Option<String>,
}

pub struct Cluster {
    pub flavor: Flavor,
    pub members: Vec<Member>,
    dir: tempfile::TempDir,
    /// `-D` properties for the Java members (e.g. forceSnapshotSync).
    java_props: Vec<String>,
}

fn ip(id: usize) -> String {
    format!("127.0.0.{id}")
}

impl Cluster {
    pub fn start(flavor: Flavor, n: usize) -> Cluster {
        Cluster::start_mixed(&vec![flavor; n])
    }

    /// Member i runs `flavors[i]`: mixed ensembles of ringkeeper and
    /// Apache ZooKeeper on the same config.
    pub fn start_mixed(flavors: &[Flavor]) -> Cluster {
        Cluster::start_mixed_with(flavors, &[])
    }

    /// As `start_mixed`, the Java members run with `java_props`
    /// (`name=value`, passed as `-Dname=value`).
    pub fn start_mixed_with(flavors: &[Flavor], java_props: &[&str]) -> Cluster {
        Cluster::start_with(flavors, java_props, false, "")
    }

    /// As `start_mixed`, with `extra_cfg` (zoo.cfg lines) in every member's
    /// config.
    pub fn start_mixed_with_cfg(flavors: &[Flavor], extra_cfg: &str) -> Cluster {
        Cluster::start_with(flavors, &[], false, extra_cfg)
    }

    /// As `start_mixed_with_cfg`, the Java members also run with
    /// `java_props` (`name=value`, passed as `-Dname=value`).
    pub fn start_mixed_with_cfg_and_props(
        flavors: &[Flavor],
        extra_cfg: &str,
        java_props: &[&str],
    ) -> Cluster {
        Cluster::start_with(flavors, java_props, false, extra_cfg)
    }

    /// As `start`, with `extra_cfg` (zoo.cfg lines) in every member's config.
    pub fn start_with_cfg(flavor: Flavor, n: usize, extra_cfg: &str) -> Cluster {
        Cluster::start_with(&vec![flavor; n], &[], false, extra_cfg)
    }

    /// As `start`, each member in a cgroup (v2) of its own from its first
    /// instruction (restarts too), so that iptables can match the packets
    /// it sends (`-m cgroup --path`, see `cgroup`): a socket belongs to the
    /// cgroup its process was in when it made it. The cgroups go when the
    /// cluster drops.
    pub fn start_in_cgroups(flavor: Flavor, n: usize) -> Cluster {
        Cluster::start_with(&vec![flavor; n], &[], true, "")
    }

    fn start_with(
        flavors: &[Flavor],
        java_props: &[&str],
        cgroups: bool,
        extra_cfg: &str,
    ) -> Cluster {
        let n = flavors.len();
        let flavor = flavors[0];
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let servers: String = (1..=n)
            .map(|i| {
                let (_, q, e) = ports[i - 1];
                format!("server.{i}={}:{q}:{e}\n", ip(i))
            })
            .collect();
        let mut members = Vec::new();
        for i in 1..=n {
            let home = dir.path().join(format!("s{i}"));
            let data = home.join("data");
            std::fs::create_dir_all(&data).unwrap();
            std::fs::write(data.join("myid"), format!("{i}\n")).unwrap();
            let client_port = ports[i - 1].0;
            let cfg = home.join("zoo.cfg");
            std::fs::write(
                &cfg,
                format!(
                    "tickTime={TICK_MS}\ninitLimit=10\nsyncLimit={SYNC_LIMIT}\n\
                     dataDir={}\nclientPort={client_port}\nclientPortAddress={}\n\
                     4lw.commands.whitelist=*\nadmin.enableServer=false\n{servers}{extra_cfg}\n{}",
                    data.display(),
                    ip(i),
                    super::extra_cfg_from_env()
                ),
            )
            .unwrap();
            members.push(Member {
                id: i,
                flavor: flavors[i - 1],
                client: format!("{}:{client_port}", ip(i)).parse().unwrap(),
                quorum: format!("{}:{}", ip(i), ports[i - 1].1).parse().unwrap(),
                election: format!("{}:{}", ip(i), ports[i - 1].2).parse().unwrap(),
                cfg,
                log: home.join("server.log"),
                child: None,
                stopped: false,
                cgroup: cgroups.then(|| {
                    let group = format!("rktest-{}-{}-m{i}", std::process::id(), unique());
                    std::fs::create_dir(cgroup2_root().join(&group))
                        .unwrap_or_else(|e| panic!("making cgroup {group}: {e}"));
                    group
                }),
            });
        }
        let mut c = Cluster {
            flavor,
            members,
            dir,
            java_props: java_props.iter().map(|p| format!("-D{p}")).collect(),
        };
        for i in 0..n {
            c.spawn(i);
        }
        c
    }

    fn spawn(&mut self, index: usize) {
        let m = &mut self.members[index];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&m.log)
            .unwrap();
        let mut cmd = match m.flavor {
            Flavor::Ringkeeper => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_ringkeeper"));
                c.arg("--config").arg(&m.cfg).env(
                    "RUST_LOG",
                    std::env::var("RK_TEST_LOG").unwrap_or("info".into()),
                );
                c
            }
            Flavor::ZooKeeper => {
                let mut c = Command::new("java");
                c.arg(format!(
                    "-Dzookeeper.log.dir={}",
                    m.log.parent().unwrap().display()
                ))
                .arg("-Xmx256m")
                .args(&self.java_props)
                .arg("-cp")
                .arg(java_classpath())
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                .arg(&m.cfg);
                c
            }
        };
        if let Some(group) = &m.cgroup {
            // Into its cgroup, then exec the member (same pid).
            let mut wrapped = Command::new("sh");
            wrapped
                .arg("-c")
                .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
                .arg(cgroup2_root().join(group))
                .arg(cmd.get_program())
                .args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                if let Some(v) = v {
                    wrapped.env(k, v);
                }
            }
            cmd = wrapped;
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        m.child = Some(cmd.spawn().expect("spawn a member"));
        m.stopped = false;
    }

    /// The cgroup of a member started by `start_in_cgroups`, as iptables'
    /// `--path` names it.
    pub fn cgroup(&self, index: usize) -> Option<&str> {
        self.members[index].cgroup.as_deref()
    }

    /// The pid of a running member.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.members[index].child.as_ref().map(|c| c.id())
    }

    pub fn size(&self) -> usize {
        self.members.len()
    }

    pub fn is_up(&self, index: usize) -> bool {
        self.members[index].child.is_some() && !self.members[index].stopped
    }

    /// SIGKILL, and wait for it.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut c) = self.members[index].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self, index: usize) {
        assert!(self.members[index].child.is_none(), "kill it first");
        self.spawn(index);
    }

    /// Empties a stopped member's data dir but for its `myid`: it comes
    /// back as a new, empty server.
    pub fn wipe(&mut self, index: usize) {
        assert!(self.members[index].child.is_none(), "kill it first");
        let data = self.members[index].cfg.parent().unwrap().join("data");
        for e in std::fs::read_dir(&data).unwrap().flatten() {
            if e.file_name() == "myid" {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }

    fn signal(&mut self, index: usize, sig: &str) {
        let pid = self.members[index].child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(sig)
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// SIGSTOP: the process keeps its sockets open and says nothing.
    pub fn pause(&mut self, index: usize) {
        self.signal(index, "-STOP");
        self.members[index].stopped = true;
    }

    pub fn resume(&mut self, index: usize) {
        self.signal(index, "-CONT");
        self.members[index].stopped = false;
    }

    pub fn srvr(&self, index: usize) -> String {
        four_letter_at(self.members[index].client, "srvr").unwrap_or_default()
    }

    /// The `Zxid:` line of srvr.
    pub fn zxid(&self, index: usize) -> Option<i64> {
        let out = self.srvr(index);
        let hex = out.lines().find_map(|l| l.strip_prefix("Zxid: 0x"))?;
        i64::from_str_radix(hex.trim(), 16).ok()
    }

    /// Waits until exactly one live member says `Mode: leader` and every
    /// other live one `Mode: follower`; returns the leader's index.
    pub fn wait_for_leader(&self, timeout: Duration) -> usize {
        let live: Vec<usize> = (0..self.size()).filter(|i| self.is_up(*i)).collect();
        self.wait_for_leader_among(&live, timeout)
    }

    /// As `wait_for_leader`, among the members `among` only (e.g. one side
    /// of a partition).
    pub fn wait_for_leader_among(&self, among: &[usize], timeout: Duration) -> usize {
        let start = Instant::now();
        loop {
            let modes: Vec<(usize, String)> = among.iter().map(|i| (*i, self.srvr(*i))).collect();
            let leaders: Vec<usize> = modes
                .iter()
                .filter(|(_, s)| s.contains("Mode: leader"))
                .map(|(i, _)| *i)
                .collect();
            let followers = modes
                .iter()
                .filter(|(_, s)| s.contains("Mode: follower"))
                .count();
            if leaders.len() == 1 && followers + 1 == among.len() {
                return leaders[0];
            }
            if start.elapsed() > timeout {
                panic!(
                    "no single leader among {among:?} within {timeout:?}:\n{}",
                    self.report()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn report(&self) -> String {
        let mut out = String::new();
        for (i, m) in self.members.iter().enumerate() {
            let log = std::fs::read_to_string(&m.log).unwrap_or_default();
            let tail: Vec<&str> = log
                .lines()
                .rev()
                .filter(|l| {
                    !l.contains("NIOServerCnxn") && !l.contains("ZooKeeperServer not running")
                })
                .take(60)
                .collect();
            out.push_str(&format!(
                "--- server {} ({}, up: {}):\n{}\n{}\n",
                m.id,
                m.client,
                self.is_up(i),
                self.srvr(i),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        out
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.size() {
            if self.members[i].stopped {
                self.resume(i);
            }
            self.kill(i);
        }
        for m in &self.members {
            if let Some(group) = &m.cgroup {
                let dir = cgroup2_root().join(group);
                let deadline = Instant::now() + Duration::from_secs(5);
                while std::fs::remove_dir(&dir).is_err() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// Where cgroup v2 is mounted (from /proc/mounts).
pub fn cgroup2_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/mounts").expect("/proc/mounts");
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
        .expect("this test needs cgroup v2 mounted")
}

/// A number no other call in this process returns.
fn unique() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// ZooKeeper's jar and config, Netty's codec (quorum TLS's
/// UnifiedServerSocket loads Netty's SslHandler, whose superclass is there,
/// and Debian's manifest leaves it off: without it the election listener
/// thread dies at its first TLS connection), and an slf4j binding when the
/// machine has one (Debian's zookeeper package ships none, so its log says
/// nothing): the Java members' logs then show in failure reports.
fn java_classpath() -> String {
    let mut cp = format!("{ZK_CONF_DIR}:{ZK_JAR}:{NETTY_CODEC_JAR}:{SERVLET_API_JAR}");
    let logging = [
        "/usr/share/java/maven3-slf4j-provider.jar",
        "/usr/share/java/maven-shared-utils.jar",
    ];
    if logging.iter().all(|j| std::path::Path::new(j).exists()) {
        for j in logging {
            cp.push(':');
            cp.push_str(j);
        }
    }
    cp
}

pub fn four_letter_at(addr: SocketAddr, word: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

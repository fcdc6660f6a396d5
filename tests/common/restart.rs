//! A ringkeeper restarted on a test server's zoo.cfg and data dir (same
//! port), for crash and recovery tests: spawn, wait until it serves, read
//! its output, kill it (also on drop).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{four_letter, Server};

/// A ringkeeper process started on an existing server's zoo.cfg; killed
/// (SIGKILL, by pid) when dropped.
pub struct Proc {
    pub child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Proc {
    /// Starts ringkeeper on `server`'s zoo.cfg (same dataDir, same port),
    /// its output in `<dir>/<tag>.log`, without waiting.
    pub fn spawn(server: &Server, tag: &str, rust_log: &str) -> Proc {
        let log = server.dir.path().join(format!("{tag}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
            .arg("--config")
            .arg(server.dir.path().join("zoo.cfg"))
            .env(
                "RUST_LOG",
                std::env::var("RK_TEST_LOG").unwrap_or(rust_log.into()),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn ringkeeper");
        Proc {
            child,
            port: server.port,
            log,
        }
    }

    /// Restarts and waits until `srvr` answers; panics (with the server's
    /// output) if it exits or takes longer than 30 s.
    pub fn restart(server: &Server, tag: &str) -> Proc {
        Proc::restart_logging(server, tag, "warn")
    }

    pub fn restart_logging(server: &Server, tag: &str, rust_log: &str) -> Proc {
        let mut p = Proc::spawn(server, tag, rust_log);
        let start = Instant::now();
        loop {
            if let Ok(out) = four_letter(p.port, "srvr") {
                if out.contains("Mode:") {
                    return p;
                }
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!(
                    "ringkeeper did not restart ({status}) on {}:\n{}",
                    server.data_dir().display(),
                    p.output()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "ringkeeper did not answer srvr within 30 s of a restart:\n{}",
                p.output()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most `within`) for the process to exit on its own.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

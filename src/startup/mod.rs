//! Checks made once before the server serves anything, so that a mistake an
//! operator makes every day (a relative or unwritable dataDir, a second
//! server on the same port or dataDir) stops startup with a clear message
//! instead of a server that looks healthy while it cannot work.

pub mod damaged;
pub mod dirs;
pub mod foreign;
pub mod port;

/// ZooKeeper's `ExitCode.UNEXPECTED_ERROR`.
pub const EXIT_UNEXPECTED_ERROR: i32 = 1;
/// ZooKeeper's `ExitCode.INVALID_INVOCATION` (a bad configuration).
pub const EXIT_INVALID_INVOCATION: i32 = 2;
/// ZooKeeper's `ExitCode.UNABLE_TO_ACCESS_DATADIR`.
pub const EXIT_UNABLE_TO_ACCESS_DATADIR: i32 = 3;

/// Why the server did not start, and the process exit code that says so.
#[derive(Debug)]
pub struct StartError {
    pub message: String,
    pub exit_code: i32,
}

impl StartError {
    pub fn data_dir(message: String) -> StartError {
        StartError {
            message,
            exit_code: EXIT_UNABLE_TO_ACCESS_DATADIR,
        }
    }
}

impl From<String> for StartError {
    fn from(message: String) -> StartError {
        StartError {
            message,
            exit_code: EXIT_UNEXPECTED_ERROR,
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

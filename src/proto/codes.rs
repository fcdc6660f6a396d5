//! Numeric constants of the protocol: opcodes (ZooDefs.OpCode), error codes
//! (KeeperException.Code), watcher event types and states (Watcher.java),
//! special xids (ClientCnxn), permissions (ZooDefs.Perms).

pub mod op {
    pub const NOTIFICATION: i32 = 0;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const SASL: i32 = 102;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const SET_WATCHES2: i32 = 105;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// KeeperException.Code values as they travel on the wire.
pub mod err {
    pub const OK: i32 = 0;
    pub const SYSTEM_ERROR: i32 = -1;
    pub const RUNTIME_INCONSISTENCY: i32 = -2;
    pub const MARSHALLING_ERROR: i32 = -5;
    pub const UNIMPLEMENTED: i32 = -6;
    pub const BAD_ARGUMENTS: i32 = -8;
    pub const NO_NODE: i32 = -101;
    pub const NO_AUTH: i32 = -102;
    pub const BAD_VERSION: i32 = -103;
    pub const NO_CHILDREN_FOR_EPHEMERALS: i32 = -108;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;
    pub const SESSION_EXPIRED: i32 = -112;
    pub const INVALID_ACL: i32 = -114;
    pub const AUTH_FAILED: i32 = -115;
    /// Answered (zxid 0) to a request on a connection that has not
    /// authenticated with a scheme `enforce.auth.schemes` requires.
    pub const SESSION_CLOSED_REQUIRE_SASL_AUTH: i32 = -124;
    pub const SESSION_MOVED: i32 = -118;
    /// A write from a read-only session (ReadOnlyRequestProcessor).
    pub const NOT_READ_ONLY: i32 = -119;
    pub const NO_WATCHER: i32 = -121;
    pub const RECONFIG_DISABLED: i32 = -123;
    pub const QUOTA_EXCEEDED: i32 = -125;
}

pub mod xid {
    pub const NOTIFICATION: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
    pub const SET_WATCHES: i32 = -8;
}

pub mod event {
    pub const NONE: i32 = -1;
    pub const NODE_CREATED: i32 = 1;
    pub const NODE_DELETED: i32 = 2;
    pub const NODE_DATA_CHANGED: i32 = 3;
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
    pub const DATA_WATCH_REMOVED: i32 = 5;
    pub const CHILD_WATCH_REMOVED: i32 = 6;
    pub const PERSISTENT_WATCH_REMOVED: i32 = 7;
}

pub mod state {
    pub const SYNC_CONNECTED: i32 = 3;
}

pub mod perm {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = 31;
}

/// WatcherType for checkWatches / removeWatches.
pub mod watcher_type {
    pub const CHILDREN: i32 = 1;
    pub const DATA: i32 = 2;
    pub const ANY: i32 = 3;
    pub const PERSISTENT: i32 = 4;
    pub const PERSISTENT_RECURSIVE: i32 = 5;
}

/// AddWatchMode.
pub mod add_watch_mode {
    pub const PERSISTENT: i32 = 0;
    pub const PERSISTENT_RECURSIVE: i32 = 1;
}

/// CreateMode flags and the node kinds they select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateMode {
    pub ephemeral: bool,
    pub sequential: bool,
    pub container: bool,
    pub ttl: bool,
}

impl CreateMode {
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        let m = |ephemeral, sequential, container, ttl| CreateMode {
            ephemeral,
            sequential,
            container,
            ttl,
        };
        Some(match flags {
            0 => m(false, false, false, false),
            1 => m(true, false, false, false),
            2 => m(false, true, false, false),
            3 => m(true, true, false, false),
            4 => m(false, false, true, false),
            5 => m(false, false, false, true),
            6 => m(false, true, false, true),
            _ => return None,
        })
    }
}

/// Internal ephemeralOwner encodings (EphemeralType.java).
pub const CONTAINER_EPHEMERAL_OWNER: i64 = i64::MIN;
pub const TTL_OWNER_MASK: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// EphemeralType: the TTL lives in the low 40 bits.
pub const MAX_TTL_MS: i64 = 0x0000_00FF_FFFF_FFFF;

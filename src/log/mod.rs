//! The txn log. This stage keeps no bytes: it counts what was appended and
//! reports it durable at once, so nothing survives a restart yet. The
//! memory-mapped segment log with group-committed fdatasync replaces it
//! behind the same two calls (append, then sync before commit).

use crate::tree::Txn;

pub struct TxnLog {
    appended_zxid: i64,
    durable_zxid: i64,
    appended_txns: u64,
}

impl Default for TxnLog {
    fn default() -> Self {
        Self::new()
    }
}

impl TxnLog {
    pub fn new() -> TxnLog {
        TxnLog {
            appended_zxid: 0,
            durable_zxid: 0,
            appended_txns: 0,
        }
    }

    pub fn append(&mut self, txn: &Txn) {
        assert!(
            txn.zxid > self.appended_zxid,
            "log append out of zxid order"
        );
        self.appended_zxid = txn.zxid;
        self.appended_txns += 1;
    }

    /// Resolves when everything appended so far is durable.
    pub async fn sync(&mut self) {
        self.durable_zxid = self.appended_zxid;
    }

    pub fn durable_zxid(&self) -> i64 {
        self.durable_zxid
    }

    pub fn appended_txns(&self) -> u64 {
        self.appended_txns
    }
}

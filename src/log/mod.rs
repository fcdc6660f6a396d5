//! The txn log: append-only segment files in dataLogDir, preallocated and
//! memory-mapped. The consensus core frames a batch of records, the log
//! copies it into the current segment, and one fdatasync, issued through
//! io_uring, makes the whole batch durable (group commit). Segments roll at
//! a size bound, only between batches; a new segment's directory entry is
//! fsynced before any of its records can be acknowledged.

pub mod record;
pub mod recovery;
pub mod segment;
pub mod txn_codec;

use std::io;
use std::path::PathBuf;
use std::rc::Rc;

use glommio::io::BufferedFile;

use segment::Segment;

#[derive(Clone, Debug)]
pub struct LogSettings {
    pub dir: PathBuf,
    /// preAllocSize: disk reserved per step, in bytes.
    pub preallocate_bytes: usize,
    /// A segment rolls once it holds this much.
    pub segment_bytes_max: usize,
    /// forceSync=no skips fdatasync: for benchmarks only.
    pub force_sync: bool,
}

pub struct TxnLog {
    settings: LogSettings,
    current: Option<Segment>,
    /// Handles for fdatasync through io_uring: the current segment's, and
    /// those of rolled segments not yet covered by a completed sync.
    current_sync: Option<Rc<BufferedFile>>,
    unsynced: Vec<Rc<BufferedFile>>,
    appended_zxid: i64,
}

impl TxnLog {
    pub fn new(settings: LogSettings, last_zxid: i64) -> TxnLog {
        TxnLog {
            settings,
            current: None,
            current_sync: None,
            unsynced: Vec::new(),
            appended_zxid: last_zxid,
        }
    }

    pub fn force_sync(&self) -> bool {
        self.settings.force_sync
    }

    /// Copies one batch of framed records (zxids `first_zxid..=last_zxid`)
    /// into the log, rolling to a new segment first when the current one is full.
    pub async fn append_batch(
        &mut self,
        framed: &[u8],
        first_zxid: i64,
        last_zxid: i64,
    ) -> io::Result<()> {
        assert_eq!(
            first_zxid,
            self.appended_zxid + 1,
            "log append out of zxid order"
        );
        assert!(last_zxid >= first_zxid);
        let full = self
            .current
            .as_ref()
            .is_none_or(|s| s.len() >= self.settings.segment_bytes_max);
        if full {
            self.roll(first_zxid).await?;
        }
        self.current
            .as_mut()
            .expect("a segment after roll")
            .append_framed(framed)?;
        self.appended_zxid = last_zxid;
        Ok(())
    }

    async fn roll(&mut self, first_zxid: i64) -> io::Result<()> {
        let seg = Segment::create(
            &self.settings.dir,
            first_zxid,
            self.settings.preallocate_bytes,
        )?;
        let sync = Rc::new(BufferedFile::open(&seg.path).await?);
        // The new file's name must survive a crash before its records count.
        glommio::io::Directory::open(&self.settings.dir)
            .await?
            .sync()
            .await?;
        tracing::debug!(segment = %seg.path.display(), "log segment started");
        if let Some(old) = self.current_sync.replace(sync) {
            self.unsynced.push(old);
        }
        self.current = Some(seg);
        Ok(())
    }

    /// A future that makes everything appended so far durable. It owns what
    /// it needs, so the core keeps working (and appending) while it runs.
    pub fn sync_job(&mut self) -> impl std::future::Future<Output = io::Result<()>> + 'static {
        let mut files: Vec<Rc<BufferedFile>> = std::mem::take(&mut self.unsynced);
        files.extend(self.current_sync.clone());
        let force = self.settings.force_sync;
        async move {
            if force {
                for f in files {
                    f.fdatasync().await?;
                }
            }
            Ok(())
        }
    }

    pub fn appended_zxid(&self) -> i64 {
        self.appended_zxid
    }
}

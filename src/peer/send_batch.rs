//! Nonblocking sends to several sockets in one system call: a small
//! io_uring of the peer net's own, used when one turn of the runner has
//! frames for more than one peer (a leader's proposals and commits).
//!
//! Why not one `send` per peer: on a host where members share CPUs, each
//! loopback send wakes its receiver, and a receiver woken on the sender's
//! CPU preempts the sender when that `send` returns, so the next peer's
//! frames waited for it: 80 us and more between a leader's two proposals in
//! `tuning/follower-timeline.sh` (tuning/networking.md §21). Within one
//! `io_uring_enter` every send is made before the sender returns to user
//! space, where the preemption happens.
//!
//! Every send carries `MSG_DONTWAIT`: a socket whose buffer is full
//! completes at once with what it took (or EAGAIN, 0 bytes), and the caller
//! queues the rest for the connection's writer. Nothing stays in the ring
//! after [`SendBatch::send`] returns, so the buffers are only borrowed.

use std::io;
use std::os::unix::io::RawFd;

use io_uring::{opcode, types, IoUring};

/// Sends in flight at once; more are sent in further rounds.
const ENTRIES: u32 = 16;

pub struct SendBatch {
    ring: IoUring,
}

impl SendBatch {
    /// A ring, or why the kernel refused one (the caller then sends one
    /// socket at a time).
    pub fn new() -> io::Result<SendBatch> {
        Ok(SendBatch {
            ring: IoUring::new(ENTRIES)?,
        })
    }

    /// Sends each frame's bytes on its descriptor, without waiting for any
    /// socket, and sets its `sent` to the bytes taken (0 on EAGAIN or a
    /// socket error, which the connection's writer then meets). An error is
    /// the ring's own: `sent` still counts every send made, and the caller
    /// must drop this ring before it frees or resends the rest (entries the
    /// kernel did not take are discarded with it).
    pub fn send(&mut self, frames: &mut [Frame]) -> io::Result<()> {
        for frame in frames.iter_mut() {
            frame.sent = 0;
        }
        for chunk in frames.chunks_mut(ENTRIES as usize) {
            {
                let mut sq = self.ring.submission();
                for (i, frame) in chunk.iter().enumerate() {
                    let len = u32::try_from(frame.bytes.len()).unwrap_or(u32::MAX);
                    let sqe = opcode::Send::new(types::Fd(frame.fd), frame.bytes.as_ptr(), len)
                        .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(i as u64);
                    // SAFETY: the bytes outlive the send: a MSG_DONTWAIT send
                    // completes within the submitting call, every completion
                    // is taken below before this returns, and on a ring error
                    // the caller drops the ring first. The ring has room for
                    // a chunk: the last round took every completion.
                    unsafe { sq.push(&sqe).expect("a chunk fits the ring") };
                }
            }
            let mut done = 0;
            while done < chunk.len() {
                let waited = self.ring.submit_and_wait(chunk.len() - done);
                for cqe in self.ring.completion() {
                    chunk[cqe.user_data() as usize].sent =
                        usize::try_from(cqe.result()).unwrap_or(0);
                    done += 1;
                }
                match waited {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// One socket's bytes for [`SendBatch::send`], and what it took of them.
pub struct Frame {
    pub fd: RawFd,
    pub bytes: Vec<u8>,
    pub sent: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Sends to two sockets land whole; a socket whose buffer is full takes
    /// what fits and the call returns at once instead of waiting for its
    /// reader (a send left waiting would hold the core's thread).
    #[test]
    fn sends_land_and_a_full_socket_does_not_block() {
        let (a, mut a_peer) = UnixStream::pair().unwrap();
        let (b, mut b_peer) = UnixStream::pair().unwrap();
        let mut batch = SendBatch::new().expect("an io_uring");
        let (x, y) = (vec![7u8; 100], vec![9u8; 300]);
        let frame = |fd, bytes: &Vec<u8>| Frame {
            fd,
            bytes: bytes.clone(),
            sent: 0,
        };
        let mut frames = [frame(a.as_raw_fd(), &x), frame(b.as_raw_fd(), &y)];
        batch.send(&mut frames).unwrap();
        assert_eq!([frames[0].sent, frames[1].sent], [100, 300]);
        let mut got = vec![0u8; 300];
        a_peer.read_exact(&mut got[..100]).unwrap();
        assert_eq!(&got[..100], &x[..]);
        b_peer.read_exact(&mut got).unwrap();
        assert_eq!(got, y);

        // Fill a's buffer; nobody reads it.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let big = vec![1u8; 64 << 20];
        let fd = a.as_raw_fd();
        let sender = std::thread::spawn(move || {
            let mut batch = SendBatch::new().expect("an io_uring");
            let mut frames = [Frame {
                fd,
                bytes: big,
                sent: 0,
            }];
            let mut total = 0;
            for _ in 0..4 {
                batch.send(&mut frames).unwrap();
                total += frames[0].sent;
            }
            done_tx.send(total).unwrap();
        });
        let total = done_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("sends to a full socket return without waiting");
        sender.join().unwrap();
        assert!(total < 4 * (64 << 20), "a full socket took everything");
        drop(a_peer);
    }
}

//! The ZooKeeper wire protocol: jute encoding, records, framing.
pub mod codes;
pub mod java_utf8;
pub mod jute;
pub mod records;

pub use records::*;

/// Default jute.maxbuffer: the largest frame a server accepts.
pub const JUTE_MAX_BUFFER_DEFAULT: usize = 0xfffff;

/// Appends one framed reply: `len | xid | zxid | err | body`. The body is
/// written only when err is 0, as ZooKeeper does.
pub fn encode_reply(out: &mut Vec<u8>, xid: i32, zxid: i64, err: i32, body: Option<&Response>) {
    encode_reply_with(out, xid, zxid, err, |out| {
        if let Some(b) = body {
            b.encode(out);
        }
    });
}

/// As `encode_reply`, with the body written by `body` (called only when
/// err is 0).
pub fn encode_reply_with(
    out: &mut Vec<u8>,
    xid: i32,
    zxid: i64,
    err: i32,
    body: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    let mut header = [0u8; 20];
    header[4..8].copy_from_slice(&xid.to_be_bytes());
    header[8..16].copy_from_slice(&zxid.to_be_bytes());
    header[16..20].copy_from_slice(&err.to_be_bytes());
    out.extend_from_slice(&header);
    if err == 0 {
        body(out);
    }
    patch_frame_len(out, start);
}

/// Appends one framed watch notification (xid -1). ZooKeeper 3.8 sends zxid -1.
pub fn encode_notification(out: &mut Vec<u8>, ev: &WatcherEvent) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&codes::xid::NOTIFICATION.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    ev.encode(out);
    patch_frame_len(out, start);
}

/// Appends a framed connect response.
pub fn encode_connect_response(out: &mut Vec<u8>, resp: &ConnectResponse) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    resp.encode(out);
    patch_frame_len(out, start);
}

fn patch_frame_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

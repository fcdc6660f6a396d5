//! How Java prints the values the four-letter words show: doubles,
//! socket addresses, dates, and the iteration order of Java hash tables
//! (where ZooKeeper's output order comes from one).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::java_compat::{spread, string_hash};

/// Java's Double.toString for the values the words print (latency
/// averages): always at least one decimal ("0.0", "1.5", "0.482").
pub fn double(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// AvgMinMaxCounter.getAvg: total / count rounded half-up to 4 decimals.
pub fn avg4(total: u64, count: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    ((total as f64 / count as f64) * 10_000.0).round() / 10_000.0
}

/// InetAddress.getHostAddress: IPv4 dotted, IPv6 as eight uncompressed
/// hex groups; an IPv4-mapped IPv6 address is the IPv4 address (Java turns
/// it into an Inet4Address).
pub fn host_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

/// InetSocketAddress.toString of an address accepted by a server socket
/// (no host name): "/127.0.0.1:2181".
pub fn socket_address(addr: SocketAddr) -> String {
    format!("/{}:{}", host_address(addr.ip()), addr.port())
}

/// Milliseconds since the Unix epoch (Java's currentTimeMillis).
pub fn wall_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// ZooKeeper's Time.currentElapsedTime: System.nanoTime() / 1e6, which on
/// Linux is CLOCK_MONOTONIC in milliseconds.
pub fn elapsed_now_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// An `Instant` on ZooKeeper's elapsed-time clock (both are CLOCK_MONOTONIC).
pub fn elapsed_ms_of(t: Instant) -> i64 {
    let now = Instant::now();
    let base = elapsed_now_ms();
    if t <= now {
        base - now.duration_since(t).as_millis() as i64
    } else {
        base + t.duration_since(now).as_millis() as i64
    }
}

/// Time.elapsedTimeToDate: an elapsed-clock time as a wall-clock Date.
pub fn elapsed_to_wall_ms(elapsed_ms: i64) -> i64 {
    wall_ms(SystemTime::now()) + elapsed_ms - elapsed_now_ms()
}

/// java.util.Date.toString ("EEE MMM dd HH:mm:ss zzz yyyy") in UTC.
pub fn date(wall_ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = wall_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        y
    )
}

/// Java's `DateFormat.getDateTimeInstance(SHORT, LONG)` in the en_US
/// locale ("M/d/yy, h:mm:ss a z", as TxnLogToolkit prints a txn's time),
/// in UTC: "11/23/26, 5:11:54 PM UTC".
pub fn short_date_long_time(wall_ms: i64) -> String {
    let secs = wall_ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    let (hour, minute, second) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let (hour12, half) = match hour {
        0 => (12, "AM"),
        1..=11 => (hour, "AM"),
        12 => (12, "PM"),
        _ => (hour - 12, "PM"),
    };
    format!(
        "{m}/{d}/{:02}, {hour12}:{minute:02}:{second:02} {half} UTC",
        y.rem_euclid(100)
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Long.hashCode.
pub fn long_hash(v: i64) -> i32 {
    (v ^ ((v as u64) >> 32) as i64) as i32
}

/// Which Java hash table an order comes from: they grow at different sizes.
#[derive(Clone, Copy)]
pub enum Table {
    /// java.util.HashMap / HashSet: resizes once size exceeds 3/4 of capacity.
    HashMap,
    /// ConcurrentHashMap: resizes once size reaches 3/4 of capacity.
    Concurrent,
}

/// Orders `items` as a Java hash table of the given kind, filled with them,
/// iterates: by bucket (spread hash masked by the capacity the table would
/// have grown to), then in the given order within a bucket. Tables that once
/// held more entries keep their larger capacity, and long buckets become
/// trees in Java; neither is modelled, so this is ZooKeeper's order for the
/// common case, not always.
pub fn hash_order<T>(items: &mut [T], table: Table, hash: impl Fn(&T) -> i32) {
    let n = items.len();
    let mut capacity = 16usize;
    loop {
        let full = match table {
            Table::HashMap => n * 4 > capacity * 3,
            Table::Concurrent => n * 4 >= capacity * 3,
        };
        if !full {
            break;
        }
        capacity *= 2;
    }
    let mask = capacity as u32 - 1;
    items.sort_by_key(|t| spread(hash(t)) & mask);
}

/// `hash_order` for strings (paths).
pub fn string_order<S: AsRef<str>>(items: &mut [S], table: Table) {
    hash_order(items, table, |s| string_hash(s.as_ref()));
}

/// How long ago `t` was, in whole milliseconds.
pub fn ms_since(t: Instant) -> u64 {
    Instant::now()
        .checked_duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_date_long_time_prints_like_txn_log_toolkit() {
        // Captured from Debian's ZooKeeper 3.8.0 TxnLogToolkit (TZ=UTC).
        assert_eq!(
            short_date_long_time(1_795_453_914_000),
            "11/23/26, 5:11:54 PM UTC"
        );
        assert_eq!(short_date_long_time(0), "1/1/70, 12:00:00 AM UTC");
        assert_eq!(short_date_long_time(43_200_000), "1/1/70, 12:00:00 PM UTC");
        assert_eq!(short_date_long_time(3_723_000), "1/1/70, 1:02:03 AM UTC");
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(double(0.0), "0.0");
        assert_eq!(double(0.482), "0.482");
        assert_eq!(double(12.0), "12.0");
        assert_eq!(double(9.5455), "9.5455");
    }

    #[test]
    fn averages_round_to_four_places() {
        assert_eq!(avg4(105, 11), 9.5455);
        assert_eq!(avg4(0, 0), 0.0);
        assert_eq!(avg4(3, 2), 1.5);
    }

    #[test]
    fn addresses_print_like_java() {
        let v4: SocketAddr = "127.0.0.1:43442".parse().unwrap();
        assert_eq!(socket_address(v4), "/127.0.0.1:43442");
        let v6: SocketAddr = "[::1]:2181".parse().unwrap();
        assert_eq!(socket_address(v6), "/0:0:0:0:0:0:0:1:2181");
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:5".parse().unwrap();
        assert_eq!(socket_address(mapped), "/10.0.0.1:5");
    }

    #[test]
    fn dates_print_like_java() {
        // 2026-11-22T04:13:54Z, a Sunday (seen in ZooKeeper's dump).
        assert_eq!(date(1_795_320_834_000), "Sun Nov 22 04:13:54 UTC 2026");
        assert_eq!(date(0), "Thu Jan 01 00:00:00 UTC 1970");
    }

    #[test]
    fn long_hash_matches_java() {
        assert_eq!(long_hash(0), 0);
        assert_eq!(long_hash(1), 1);
        assert_eq!(long_hash(-1), 0);
        assert_eq!(long_hash(0x1_0000_0001), 0);
    }

    #[test]
    fn hash_order_follows_buckets() {
        // "/b" hashes to bucket 1 of 16 ... "/a" to bucket 0: Java's
        // HashMap iterates "/a" first whatever the insertion order.
        let mut v = vec!["/nope", "/b", "/a"];
        string_order(&mut v, Table::HashMap);
        let mut buckets: Vec<u32> = v.iter().map(|s| spread(string_hash(s)) & 15).collect();
        let sorted = {
            let mut b = buckets.clone();
            b.sort();
            b
        };
        assert_eq!(buckets, sorted);
        buckets.dedup();
        assert!(!buckets.is_empty());
    }
}

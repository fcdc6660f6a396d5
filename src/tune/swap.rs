//! Swap (/proc/swaps) and vm.swappiness.

use super::{bytes, Check, Context, Status, Value};

/// One active swap area.
#[derive(Debug, Clone, PartialEq)]
pub struct SwapArea {
    pub name: String,
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
}

/// Parses /proc/swaps (a header line, then `name type size used prio`,
/// sizes in KiB).
pub fn parse_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 {
                return None;
            }
            Some(SwapArea {
                name: f[0].to_string(),
                kind: f[1].to_string(),
                size_bytes: f[2].parse::<u64>().ok()? * 1024,
                used_bytes: f[3].parse::<u64>().ok()? * 1024,
            })
        })
        .collect()
}

/// swappiness above this with swap on is a warning.
const SWAPPINESS_MAX: u32 = 10;

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("swap", "Swap").why(
        "The whole tree, the sessions and the watches live in memory. A page of them \
         swapped out turns a microsecond read into a disk read, and a stalled consensus \
         core misses session ticks: sessions expire and, in an ensemble, followers drop \
         out. Apache ZooKeeper's admin guide says the same: do not let it swap.",
    );
    let swaps = ctx.host.read("/proc/swaps");
    let swappiness = ctx
        .host
        .read("/proc/sys/vm/swappiness")
        .and_then(|s| s.parse::<u32>().ok());
    let Some(text) = swaps else {
        return c.status(Status::Unknown).found("no /proc/swaps");
    };
    let areas = parse_swaps(&text);
    let total: u64 = areas.iter().map(|a| a.size_bytes).sum();
    let used: u64 = areas.iter().map(|a| a.used_bytes).sum();
    let sw = swappiness.map_or("(unknown)".to_string(), |s| s.to_string());
    let c = c
        .value("swap_bytes", Value::Int(total as i64))
        .value("swap_used_bytes", Value::Int(used as i64))
        .value(
            "swappiness",
            swappiness.map_or(Value::Text("unknown".into()), |s| Value::Int(s.into())),
        );
    if areas.is_empty() {
        return c.found(format!("no swap; vm.swappiness = {sw}"));
    }
    let list: Vec<String> = areas
        .iter()
        .map(|a| {
            format!(
                "{} ({}, {}, {} used)",
                a.name,
                a.kind,
                bytes(a.size_bytes),
                bytes(a.used_bytes)
            )
        })
        .collect();
    let c = c.found(format!(
        "swap on: {}; vm.swappiness = {sw}",
        list.join(", ")
    ));
    if swappiness.is_none_or(|s| s > SWAPPINESS_MAX) {
        c.status(Status::Warn).fix(
            "swapoff -a (and remove the swap lines of /etc/fstab), or at least \
             sysctl -w vm.swappiness=1 (in /etc/sysctl.d/ to keep it); with systemd, \
             MemorySwapMax=0 in the unit keeps this service out of swap",
        )
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_parse() {
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                 /dev/zram0                              partition\t8388604\t\t1024\t\t100\n\
                 /swapfile file 1048576 0 -2\n";
        let a = parse_swaps(t);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].name, "/dev/zram0");
        assert_eq!(a[0].size_bytes, 8388604 * 1024);
        assert_eq!(a[0].used_bytes, 1024 * 1024);
        assert_eq!(a[1].kind, "file");
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }
}

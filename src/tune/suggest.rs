//! `tune suggest`: the zoo.cfg fragment. Only keys the server reads
//! (src/config.rs): ringkeeper.pinCores, ringkeeper.shards,
//! ringkeeper.fsyncDelayUs, ringkeeper.fsyncBatchTxnsMax,
//! ringkeeper.fsyncBatchBytesMax and ringkeeper.logWrite, each with the
//! reason for its value as a comment above it.

use std::io::{self, Write};

use super::cpus::{cpu_list_text, Layout};
use super::fsync::{self, us_text, SyncStats, PLAN_WRITES_PER_S};
use super::json::string;
use super::sweep::{self, Sweep};
use super::{logdir, odirect, Context};
use crate::config::{DEFAULT_FSYNC_BATCH_BYTES_MAX, DEFAULT_FSYNC_BATCH_TXNS_MAX};

/// One suggested line.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: &'static str,
    pub value: String,
    pub reason: String,
}

/// What `suggest` prints.
#[derive(Debug, Clone)]
pub struct Suggestion {
    /// What was measured, as comment lines.
    pub measured: Vec<String>,
    pub entries: Vec<Entry>,
    pub sweep: Option<Sweep>,
}

/// Log bytes to allow per txn when bounding a batch by bytes: a 1 KiB
/// value plus its record, path and headroom (the defaults agree: 10000
/// such txns fit in 16 MiB).
const BYTES_PER_TXN: usize = 1536;

/// fsyncBatchTxnsMax for a measured p99: room for the batch that keeps
/// up with [`PLAN_WRITES_PER_S`] at that latency, twice over, never
/// below the default.
pub fn batch_txns_for(p99_us: f64) -> (usize, usize) {
    let needed = (PLAN_WRITES_PER_S * p99_us / 1e6).ceil() as usize;
    let value = (needed * 2)
        .div_ceil(1000)
        .saturating_mul(1000)
        .max(DEFAULT_FSYNC_BATCH_TXNS_MAX);
    (needed, value)
}

pub fn batch_bytes_for(txns: usize) -> usize {
    let mib = 1 << 20;
    (txns * BYTES_PER_TXN)
        .div_ceil(mib)
        .saturating_mul(mib)
        .max(DEFAULT_FSYNC_BATCH_BYTES_MAX)
}

pub fn suggest(ctx: &Context, sweep_opts: Option<&sweep::Options>) -> Result<Suggestion, String> {
    let mut measured = Vec::new();
    let layout = Layout::read(&ctx.host);
    let plan = layout.plan();
    let usable = layout.usable();
    measured.push(format!(
        "CPUs: online {}, usable {}, isolated {}; NIC interrupts by CPU: {}",
        if layout.online.is_empty() {
            "unknown".to_string()
        } else {
            cpu_list_text(&layout.online)
        },
        cpu_list_text(&usable),
        cpu_list_text(&layout.isolated),
        if layout.load.is_empty() {
            "none found".to_string()
        } else {
            layout
                .load
                .iter()
                .map(|(c, n)| format!("CPU{c} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    let dir_ok = logdir::usable(ctx).status != super::Status::Fail;
    let stats: Option<SyncStats> = if dir_ok {
        match fsync::measure(&ctx.log_dir, ctx.max_syncs, ctx.max_sync_time) {
            Ok(s) => {
                measured.push(format!(
                    "fdatasync of 4 KiB on {}: p50 {}, p99 {}, max {} ({} syncs, {})",
                    ctx.log_dir.display(),
                    us_text(s.p50_us),
                    us_text(s.p99_us),
                    us_text(s.max_us),
                    s.count,
                    if s.direct { "O_DIRECT" } else { "buffered" }
                ));
                Some(s)
            }
            Err(e) => {
                measured.push(format!("fdatasync not measured: {e}"));
                None
            }
        }
    } else {
        measured.push(format!(
            "fdatasync not measured: dataLogDir {} is not usable (`ringkeeper tune check` says why)",
            ctx.log_dir.display()
        ));
        None
    };
    let direct = dir_ok && odirect::probe(&ctx.log_dir).is_ok();
    let sweep = match sweep_opts {
        Some(o) => Some(sweep::run(ctx, o)?),
        None => None,
    };
    let mut entries = Vec::new();
    entries.push(Entry {
        key: "ringkeeper.pinCores",
        value: plan
            .cpus
            .as_ref()
            .map(|c| {
                c.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "none".into()),
        reason: plan.reason.clone(),
    });
    entries.push(Entry {
        key: "ringkeeper.shards",
        value: plan.shards.to_string(),
        reason: match &plan.cpus {
            Some(_) => format!(
                "one shard per CPU after the consensus core's: {}",
                plan.shards
            ),
            None => format!(
                "the server's default, one per usable CPU but the consensus core's, at \
                 least one: {}",
                plan.shards
            ),
        },
    });
    let chosen = sweep.as_ref().and_then(|s| s.chosen.map(|i| &s.points[i]));
    let swept = |key: &str| -> Option<&str> {
        chosen.and_then(|p| p.lines.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
    };
    let sweep_note = chosen.map(|p| {
        format!(
            " The sweep chose {} ({:.0} ops/s, write p99 {} us).",
            p.label, p.ops_per_s, p.write_p99_us as u64
        )
    });
    let delay = swept("ringkeeper.fsyncDelayUs").unwrap_or("0").to_string();
    entries.push(Entry {
        key: "ringkeeper.fsyncDelayUs",
        value: delay.clone(),
        reason: format!(
            "{}{}",
            if delay == "0" {
                "start each fdatasync as soon as the previous one completes: under load the \
                 next batch fills while a sync runs, so waiting only adds latency \
                 (tuning/fsync.md: a 1000 us delay cut 138k to 113k writes/s)."
            } else {
                "wait this long before starting a sync, so more writes join it."
            },
            sweep_note.clone().unwrap_or_default()
        ),
    });
    let (txns, txn_reason) = match (swept("ringkeeper.fsyncBatchTxnsMax"), &stats) {
        (Some(v), _) => (
            v.parse::<usize>().unwrap_or(DEFAULT_FSYNC_BATCH_TXNS_MAX),
            format!(
                "a batch bound the sweep measured best here.{}",
                sweep_note.clone().unwrap_or_default()
            ),
        ),
        (None, Some(s)) => {
            let (needed, value) = batch_txns_for(s.p99_us);
            (
                value,
                format!(
                    "one fdatasync per batch, so throughput is about batch / sync latency: at \
                     the measured p99 of {} a consensus core's ~{}k writes/s need batches of \
                     ~{needed} txns; twice that, never below the default {}, so the bound \
                     only limits memory.{}",
                    us_text(s.p99_us),
                    PLAN_WRITES_PER_S as u64 / 1000,
                    DEFAULT_FSYNC_BATCH_TXNS_MAX,
                    sweep_note.clone().unwrap_or_default()
                ),
            )
        }
        (None, None) => (
            DEFAULT_FSYNC_BATCH_TXNS_MAX,
            "the default: fdatasync latency was not measured".to_string(),
        ),
    };
    entries.push(Entry {
        key: "ringkeeper.fsyncBatchTxnsMax",
        value: txns.to_string(),
        reason: txn_reason,
    });
    let bytes = batch_bytes_for(txns);
    entries.push(Entry {
        key: "ringkeeper.fsyncBatchBytesMax",
        value: bytes.to_string(),
        reason: format!(
            "{} MiB: {txns} txns of ~{:.1} KiB of log each (1 KiB values), never below \
             the default 16 MiB",
            bytes >> 20,
            BYTES_PER_TXN as f64 / 1024.0
        ),
    });
    entries.push(Entry {
        key: "ringkeeper.logWrite",
        value: if direct { "direct" } else { "buffered" }.to_string(),
        reason: if direct {
            "dataLogDir takes O_DIRECT|O_DSYNC writes: one write per batch makes it durable, \
             no page cache copy"
                .to_string()
        } else {
            "dataLogDir refuses O_DIRECT (or was not checked): the server would fall back to \
             write + fdatasync anyway"
                .to_string()
        },
    });
    Ok(Suggestion {
        measured,
        entries,
        sweep,
    })
}

/// Wraps `text` into comment lines of at most ~78 columns.
fn comment(text: &str, out: &mut dyn Write) -> io::Result<()> {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 78 && line.len() > 1 {
            writeln!(out, "{line}")?;
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    if line.len() > 1 {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

pub fn write_fragment(s: &Suggestion, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "# ringkeeper tune suggest: add to zoo.cfg (every value's reason above it)"
    )?;
    for m in &s.measured {
        comment(&format!("measured: {m}"), out)?;
    }
    if let Some(sw) = &s.sweep {
        writeln!(
            out,
            "# sweep: 100% setData (1 KiB), 32 sessions x 100 outstanding, {} s per setting after {} s of warm-up, {} round(s){}",
            sw.seconds,
            sw.warmup,
            sw.rounds,
            if sw.rounds > 1 { " (medians)" } else { "" }
        )?;
        for line in sweep::table(sw) {
            writeln!(out, "#   {line}")?;
        }
        match sw.chosen {
            Some(i) => writeln!(out, "# chosen: {}", sw.points[i].label)?,
            None => writeln!(out, "# chosen: none (no setting ran without errors)")?,
        }
    }
    for e in &s.entries {
        writeln!(out)?;
        comment(&e.reason, out)?;
        writeln!(out, "{}={}", e.key, e.value)?;
    }
    Ok(())
}

pub fn write_json(s: &Suggestion, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{{")?;
    let measured: Vec<String> = s.measured.iter().map(|m| string(m)).collect();
    writeln!(out, "  \"measured\": [{}],", measured.join(","))?;
    writeln!(out, "  \"suggestions\": [")?;
    for (i, e) in s.entries.iter().enumerate() {
        let comma = if i + 1 < s.entries.len() { "," } else { "" };
        writeln!(
            out,
            "    {{\"key\":{},\"value\":{},\"reason\":{}}}{comma}",
            string(e.key),
            string(&e.value),
            string(&e.reason)
        )?;
    }
    write!(out, "  ]")?;
    if let Some(sw) = &s.sweep {
        writeln!(out, ",")?;
        writeln!(out, "  \"sweep\": [")?;
        for (i, p) in sw.points.iter().enumerate() {
            let comma = if i + 1 < sw.points.len() { "," } else { "" };
            writeln!(
                out,
                "    {{\"setting\":{},\"ops_per_s\":{:.1},\"write_p50_us\":{:.0},\"write_p99_us\":{:.0},\"errors\":{},\"failed\":{},\"chosen\":{}}}{comma}",
                string(p.label),
                p.ops_per_s,
                p.write_p50_us,
                p.write_p99_us,
                p.errors,
                p.failed.as_deref().map_or("null".to_string(), string),
                Some(i) == sw.chosen
            )?;
        }
        write!(out, "  ]")?;
    }
    writeln!(out)?;
    writeln!(out, "}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_bounds_cover_the_latency_and_never_shrink_the_default() {
        assert_eq!(batch_txns_for(100.0), (25, DEFAULT_FSYNC_BATCH_TXNS_MAX));
        // 100 ms p99: 25,000 txns needed, 50,000 suggested.
        assert_eq!(batch_txns_for(100_000.0), (25_000, 50_000));
        assert_eq!(batch_bytes_for(10_000), DEFAULT_FSYNC_BATCH_BYTES_MAX);
        assert_eq!(batch_bytes_for(50_000), 74 << 20);
    }

    #[test]
    fn comments_wrap() {
        let mut v = Vec::new();
        comment(&"word ".repeat(40), &mut v).unwrap();
        let text = String::from_utf8(v).unwrap();
        assert!(text.lines().count() > 1);
        assert!(text.lines().all(|l| l.starts_with("# ") && l.len() <= 80));
    }
}

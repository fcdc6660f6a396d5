//! Transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled)
//! against ringkeeper.transparentHugePages (src/memory.rs: the server turns
//! THP off for itself unless told to keep the system's setting).

use super::{Check, Context, Status, Value};

/// The bracketed choice of a sysfs selector: `always [madvise] never`.
pub fn selected(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(&text[start..end])
}

pub fn check(ctx: &Context) -> Check {
    let keep = ctx.config.transparent_huge_pages;
    let c = Check::new("transparent_hugepages", "Transparent huge pages").why(
        "In `always` mode the kernel backs the tree's small, scattered allocations with 2 \
         MiB pages: more memory held (1M znodes: 274 MiB of RSS instead of 266), and \
         khugepaged's compaction and direct compaction at fault time add latency spikes. \
         The server turns THP off for itself (prctl PR_SET_THP_DISABLE) unless \
         ringkeeper.transparentHugePages=true.",
    );
    let enabled = ctx.host.read("/sys/kernel/mm/transparent_hugepage/enabled");
    let defrag = ctx.host.read("/sys/kernel/mm/transparent_hugepage/defrag");
    let Some(mode) = enabled.as_deref().and_then(selected).map(str::to_string) else {
        return c.status(Status::Unknown).found(
            "no /sys/kernel/mm/transparent_hugepage/enabled (a kernel without THP, or /sys \
             not mounted)",
        );
    };
    let defrag_mode = defrag.as_deref().and_then(selected).map(str::to_string);
    let found = format!(
        "enabled = {mode}, defrag = {}; ringkeeper.transparentHugePages={keep} ({})",
        defrag_mode.as_deref().unwrap_or("(unknown)"),
        if keep {
            "the server keeps the system's setting"
        } else {
            "the server turns THP off for itself"
        }
    );
    let c = c.found(found).value("enabled", Value::Text(mode.clone()));
    if mode == "always" && keep {
        c.status(Status::Warn).fix(
            "ringkeeper.transparentHugePages=false (the default), or `echo madvise > \
             /sys/kernel/mm/transparent_hugepage/enabled` (transparent_hugepage=madvise on \
             the kernel command line to keep it)",
        )
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bracketed_mode_is_selected() {
        assert_eq!(selected("always [madvise] never"), Some("madvise"));
        assert_eq!(selected("[always] madvise never"), Some("always"));
        assert_eq!(selected("always madvise never"), None);
    }
}

//! The CPU and interrupt layout for `ringkeeper.pinCores`: online CPUs,
//! the ones this process may run on, isolated ones (isolcpus, nohz_full),
//! which CPUs take the NIC's interrupts (/proc/interrupts), and where the
//! configured pinning would put the consensus core and the shards. The
//! plan `tune suggest` proposes is made here too ([`plan`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Check, Context, Host, Status, Value};
use crate::config::{ConsensusExecutor, CpuPinning};

/// Parses a kernel CPU list (`0-3,5,7-8`); items that are not numbers or
/// ranges (isolcpus flags such as `domain`) are skipped.
pub fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut cpus = BTreeSet::new();
    for item in text.trim().split(',').map(str::trim) {
        // isolcpus=1-7:2 (every second); the stride is rare, honoured anyway.
        let (range, stride) = match item.split_once(':') {
            Some((r, s)) => (r, s.parse::<usize>().ok().filter(|s| *s > 0)),
            None => (item, Some(1)),
        };
        let Some(stride) = stride else { continue };
        match range.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    if a <= b && b - a < 65536 {
                        cpus.extend((a..=b).step_by(stride));
                    }
                }
            }
            None => {
                if let Ok(a) = range.parse::<usize>() {
                    cpus.insert(a);
                }
            }
        }
    }
    cpus.into_iter().collect()
}

/// The kernel's compact form of a CPU list: `0-3,5`.
pub fn cpu_list_text(cpus: &[usize]) -> String {
    let mut sorted: Vec<usize> = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(",")
    }
}

/// Online CPUs (/sys/devices/system/cpu/online); empty when unknown.
pub fn online_cpus(host: &Host) -> Vec<usize> {
    host.read("/sys/devices/system/cpu/online")
        .map(|t| parse_cpu_list(&t))
        .unwrap_or_default()
}

/// CPUs this process may run on (sched_getaffinity).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// `key=value` of the kernel command line, CPU list parsed.
fn cmdline_cpus(cmdline: &str, key: &str) -> Vec<usize> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .flat_map(parse_cpu_list)
        .collect()
}

/// Isolated CPUs: sysfs `isolated` (isolcpus) and nohz_full.
pub fn isolated_cpus(host: &Host) -> (Vec<usize>, Vec<usize>) {
    let mut isolated: BTreeSet<usize> = host
        .read("/sys/devices/system/cpu/isolated")
        .map(|t| parse_cpu_list(&t))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let cmdline = host.read("/proc/cmdline").unwrap_or_default();
    isolated.extend(cmdline_cpus(&cmdline, "isolcpus"));
    let nohz: Vec<usize> = host
        .read("/sys/devices/system/cpu/nohz_full")
        .map(|t| parse_cpu_list(&t))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| cmdline_cpus(&cmdline, "nohz_full"));
    (isolated.into_iter().collect(), nohz)
}

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq)]
pub struct IrqLine {
    /// `38`, or `LOC`, `NMI`, ...
    pub irq: String,
    /// Count per CPU column, paired with the column's CPU id.
    pub counts: Vec<(usize, u64)>,
    /// The rest: chip, hardware irq, trigger, action names.
    pub desc: String,
}

impl IrqLine {
    pub fn number(&self) -> Option<u32> {
        self.irq.parse().ok()
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.1).sum()
    }
}

/// Parses /proc/interrupts: the header names the CPU columns (offline
/// CPUs have none), each line the counts then the description.
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns: Vec<usize> = header
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut out = Vec::new();
    for line in lines {
        let Some((irq, rest)) = line.split_once(':') else {
            continue;
        };
        let mut tokens = rest.split_whitespace().peekable();
        let mut counts = Vec::new();
        for &cpu in &columns {
            match tokens.peek().and_then(|t| t.parse::<u64>().ok()) {
                Some(n) => {
                    counts.push((cpu, n));
                    tokens.next();
                }
                None => break,
            }
        }
        out.push(IrqLine {
            irq: irq.trim().to_string(),
            counts,
            desc: tokens.collect::<Vec<_>>().join(" "),
        });
    }
    out
}

/// A network interface backed by a device, with the IRQs it raises.
#[derive(Debug, Clone)]
pub struct Nic {
    pub name: String,
    /// The device's name (`virtio2`, `0000:3b:00.0`).
    pub device: String,
    pub irqs: Vec<IrqLine>,
    /// The NUMA node of its device, where the kernel knows it.
    pub numa_node: Option<u32>,
}

/// A PCI address: `0000:00:03.0`.
fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

/// Whether interrupt line `l` belongs to the interface `name` on `device`
/// (PCI address `pci`, MSI vectors `msi`).
pub fn irq_matches(l: &IrqLine, name: &str, device: &str, pci: Option<&str>, msi: &[u32]) -> bool {
    if l.number().is_some_and(|n| msi.contains(&n)) {
        return true;
    }
    l.desc.split_whitespace().any(|t| {
        let t = t.trim_end_matches(',');
        t == name
            || t.starts_with(&format!("{name}-"))
            || t == device
            || t.starts_with(&format!("{device}-"))
            || pci.is_some_and(|p| t.ends_with(&format!("@pci:{p}")))
    })
}

/// Interfaces with a device (not lo, bridges or other virtual ones) and
/// their interrupt lines.
pub fn nics(host: &Host, interrupts: &[IrqLine]) -> Vec<Nic> {
    let Ok(entries) = std::fs::read_dir(host.path("/sys/class/net")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let Ok(dev) = std::fs::canonicalize(host.path(&format!("/sys/class/net/{name}/device")))
        else {
            continue;
        };
        let device = file_name(&dev);
        let pci = dev.ancestors().map(file_name).find(|n| is_pci_address(n));
        let mut msi = msi_irqs(&dev.join("msi_irqs"));
        if msi.is_empty() {
            if let Some(parent) = dev.parent() {
                msi = msi_irqs(&parent.join("msi_irqs"));
            }
        }
        let irqs: Vec<IrqLine> = interrupts
            .iter()
            .filter(|l| l.number().is_some())
            .filter(|l| irq_matches(l, &name, &device, pci.as_deref(), &msi))
            .cloned()
            .collect();
        // A virtio NIC's node is its PCI parent's; -1 means no affinity.
        let numa_node = [dev.join("numa_node"), dev.join("../numa_node")]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        out.push(Nic {
            name,
            device,
            irqs,
            numa_node,
        });
    }
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn msi_irqs(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// NIC interrupts taken so far, per CPU.
pub fn nic_load(nics: &[Nic]) -> BTreeMap<usize, u64> {
    let mut load = BTreeMap::new();
    for l in nics.iter().flat_map(|n| &n.irqs) {
        for &(cpu, n) in &l.counts {
            *load.entry(cpu).or_insert(0) += n;
        }
    }
    load
}

/// What `tune suggest` proposes for ringkeeper.pinCores and .shards.
#[derive(Debug, Clone, PartialEq)]
pub struct PinPlan {
    /// None: unpinned (`ringkeeper.pinCores=none`); else the consensus
    /// core's CPU first, then one per shard.
    pub cpus: Option<Vec<usize>>,
    pub shards: usize,
    pub reason: String,
}

/// Below this many usable CPUs the plan leaves the executors unpinned.
pub const PIN_MIN_CPUS: usize = 4;

/// What the plan is made from.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// CPUs the server may run on.
    pub usable: Vec<usize>,
    pub isolated: Vec<usize>,
    /// NIC interrupts taken so far, per CPU.
    pub load: BTreeMap<usize, u64>,
    /// Each CPU's physical core, as the lowest id of its SMT siblings.
    pub core_of: BTreeMap<usize, usize>,
    /// The CPUs of the NUMA node the NIC hangs off (empty: unknown or one node).
    pub nic_node: Vec<usize>,
}

/// The plan: pin onto isolated CPUs when at least two are usable; else,
/// with [`PIN_MIN_CPUS`] or more, the consensus core on the CPU taking the
/// fewest NIC interrupts and a shard on every other, keeping to the NIC's
/// NUMA node and to one SMT thread per core where enough remain; else
/// unpinned, with the server's default shard count.
pub fn plan(input: &PlanInput) -> PinPlan {
    let load = &input.load;
    let pick = |set: &[usize]| -> Vec<usize> {
        // The quietest CPU (fewest NIC interrupts; the highest id on a tie,
        // as CPU 0 tends to take housekeeping) runs the consensus core.
        let core = set
            .iter()
            .copied()
            .min_by_key(|c| (load.get(c).copied().unwrap_or(0), std::cmp::Reverse(*c)))
            .expect("a non-empty set");
        std::iter::once(core)
            .chain(set.iter().copied().filter(|c| *c != core))
            .collect()
    };
    let mut notes = Vec::new();
    let mut candidates = input.usable.clone();
    let on_node: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|c| input.nic_node.contains(c))
        .collect();
    if on_node.len() >= PIN_MIN_CPUS && on_node.len() < candidates.len() {
        notes.push(format!(
            "only CPUs {} of the NIC's NUMA node (its packets and the replies stay in \
             that node's memory)",
            cpu_list_text(&on_node)
        ));
        candidates = on_node;
    }
    let iso: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|c| input.isolated.contains(c))
        .collect();
    if iso.len() >= 2 {
        let cpus = pick(&iso);
        let shards = cpus.len() - 1;
        notes.insert(
            0,
            format!(
                "CPUs {} are isolated (isolcpus): nothing else is scheduled there; the \
                 consensus core on CPU {} (fewest NIC interrupts), a shard on each of the \
                 other {shards}",
                cpu_list_text(&iso),
                cpus[0]
            ),
        );
        return PinPlan {
            reason: notes.join("; "),
            cpus: Some(cpus),
            shards,
        };
    }
    // One thread per physical core: SMT siblings share its execution
    // units and caches, so two executors there slow each other down.
    let mut cores = BTreeSet::new();
    let one_per_core: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|c| cores.insert(input.core_of.get(c).copied().unwrap_or(*c)))
        .collect();
    if one_per_core.len() < candidates.len() && one_per_core.len() >= PIN_MIN_CPUS {
        notes.push(format!(
            "one SMT thread per core ({} of {} CPUs: siblings share a core's execution \
             units and caches)",
            one_per_core.len(),
            candidates.len()
        ));
        candidates = one_per_core;
    }
    if candidates.len() >= PIN_MIN_CPUS {
        let cpus = pick(&candidates);
        let shards = cpus.len() - 1;
        let quiet = load.get(&cpus[0]).copied().unwrap_or(0);
        notes.insert(
            0,
            format!(
                "{} CPUs: one executor per CPU, none migrating; the consensus core (every \
                 write passes through it) on CPU {} ({quiet} NIC interrupts so far, the \
                 fewest), a shard on each of the other {shards}, which take their own \
                 connections' interrupts",
                candidates.len(),
                cpus[0]
            ),
        );
        return PinPlan {
            reason: notes.join("; "),
            cpus: Some(cpus),
            shards,
        };
    }
    let usable = input.usable.len();
    let shards = usable.saturating_sub(1).max(1);
    PinPlan {
        cpus: None,
        shards,
        reason: format!(
            "{usable} usable CPU(s): pinning would leave none for the kernel, the NIC's \
             interrupts and local clients; unpinned, the consensus core runs beside the \
             only shard (consensusExecutor auto: shared), and on the 2-core development \
             machine pinned executors made one session's writes slower"
        ),
    }
}

/// Where the configured server would run each executor: (executor, CPU).
pub fn configured_placement(
    pinning: &CpuPinning,
    layout: ConsensusExecutor,
    shards: usize,
) -> Option<Vec<(String, usize)>> {
    let CpuPinning::Cpus(cpus) = pinning else {
        return None;
    };
    // src/server.rs: executor index 0 is the consensus core's own, shard i
    // runs at index i + 1, CPU cpus[index % len]; a shared core runs on
    // shard 0's.
    let at = |index: usize| cpus[index % cpus.len()];
    let mut out = Vec::new();
    if layout == ConsensusExecutor::Own {
        out.push(("consensus core".to_string(), at(0)));
    }
    for s in 0..shards {
        let name = if s == 0 && layout != ConsensusExecutor::Own {
            "shard 0 + consensus core".to_string()
        } else {
            format!("shard {s}")
        };
        out.push((name, at(s + 1)));
    }
    Some(out)
}

fn irqbalance_running(host: &Host) -> Option<bool> {
    let dir = std::fs::read_dir(host.path("/proc")).ok()?;
    Some(dir.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim() == "irqbalance")
    }))
}

/// Everything the layout check and `suggest` read.
pub struct Layout {
    pub online: Vec<usize>,
    pub allowed: Vec<usize>,
    pub isolated: Vec<usize>,
    pub nohz_full: Vec<usize>,
    pub nics: Vec<Nic>,
    pub load: BTreeMap<usize, u64>,
    /// Each online CPU's physical core (lowest id of its SMT siblings).
    pub core_of: BTreeMap<usize, usize>,
    /// CPUs of the NIC's NUMA node when the machine has more than one.
    pub nic_node: Vec<usize>,
}

impl Layout {
    pub fn read(host: &Host) -> Layout {
        let online = online_cpus(host);
        let mut allowed = if host.is_real() {
            allowed_cpus()
        } else {
            online.clone()
        };
        if !online.is_empty() {
            allowed.retain(|c| online.contains(c));
        }
        let (isolated, nohz_full) = isolated_cpus(host);
        let interrupts = host
            .read("/proc/interrupts")
            .map(|t| parse_interrupts(&t))
            .unwrap_or_default();
        let nics = nics(host, &interrupts);
        let load = nic_load(&nics);
        let core_of = online
            .iter()
            .filter_map(|&c| {
                let sib = host.read(&format!(
                    "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
                ))?;
                Some((c, parse_cpu_list(&sib).into_iter().min()?))
            })
            .collect();
        let nic_node = nics
            .iter()
            .find_map(|n| n.numa_node)
            .and_then(|node| host.read(&format!("/sys/devices/system/node/node{node}/cpulist")))
            .map(|t| parse_cpu_list(&t))
            .unwrap_or_default();
        Layout {
            online,
            allowed,
            isolated,
            nohz_full,
            nics,
            load,
            core_of,
            nic_node,
        }
    }

    /// CPUs the server could be pinned to.
    pub fn usable(&self) -> Vec<usize> {
        if self.allowed.is_empty() {
            self.online.clone()
        } else {
            self.allowed.clone()
        }
    }

    pub fn plan(&self) -> PinPlan {
        plan(&PlanInput {
            usable: self.usable(),
            isolated: self.isolated.clone(),
            load: self.load.clone(),
            core_of: self.core_of.clone(),
            nic_node: self.nic_node.clone(),
        })
    }
}

pub fn check(ctx: &Context) -> Check {
    let c = Check::new("cpu_layout", "CPU and interrupt layout for pinning").why(
        "ringkeeper runs one executor per shard plus the consensus core, thread per \
         core. Pinned (ringkeeper.pinCores) they never migrate and keep their caches; a \
         CPU also taking the NIC's interrupts (and their softirq work) steals time from \
         whatever runs there, which hurts most on the consensus core that every write \
         passes through. Isolated CPUs (isolcpus) keep other tasks away.",
    );
    let l = Layout::read(&ctx.host);
    let usable = l.usable();
    let mut found = format!(
        "online CPUs {}; this process may run on {}; isolated {}; nohz_full {}",
        if l.online.is_empty() {
            "(unknown)".to_string()
        } else {
            cpu_list_text(&l.online)
        },
        cpu_list_text(&l.allowed),
        cpu_list_text(&l.isolated),
        cpu_list_text(&l.nohz_full),
    );
    for nic in &l.nics {
        if nic.irqs.is_empty() {
            found.push_str(&format!(
                "\nNIC {} ({}): no interrupt lines found",
                nic.name, nic.device
            ));
            continue;
        }
        let mut parts = Vec::new();
        for irq in &nic.irqs {
            let affinity = ctx
                .host
                .read(&format!("/proc/irq/{}/smp_affinity_list", irq.irq))
                .unwrap_or_else(|| "?".into());
            let busy: Vec<String> = irq
                .counts
                .iter()
                .filter(|c| c.1 > 0)
                .map(|(cpu, n)| format!("CPU{cpu} {n}"))
                .collect();
            parts.push(format!(
                "IRQ {} {} [{}] affinity {affinity}",
                irq.irq,
                irq.desc.split_whitespace().last().unwrap_or(""),
                if busy.is_empty() {
                    "none yet".to_string()
                } else {
                    busy.join(", ")
                }
            ));
        }
        found.push_str(&format!(
            "\nNIC {} ({}{}): {}",
            nic.name,
            nic.device,
            nic.numa_node
                .map(|n| format!(", NUMA node {n}"))
                .unwrap_or_default(),
            parts.join("; ")
        ));
    }
    if l.nics.is_empty() {
        found.push_str("\nno network interface with a device (or no /sys/class/net)");
    }
    match irqbalance_running(&ctx.host) {
        Some(true) => found.push_str("\nirqbalance is running (it moves IRQ affinity)"),
        Some(false) => found.push_str("\nirqbalance is not running"),
        None => {}
    }
    let mut status = if l.online.is_empty() {
        Status::Unknown
    } else {
        Status::Ok
    };
    let mut fixes = Vec::new();
    match configured_placement(&ctx.config.cpu_pinning, ctx.layout, ctx.shards) {
        None => found.push_str(&format!(
            "\nringkeeper.pinCores: none (executors unpinned; {} shard(s))",
            ctx.shards
        )),
        Some(placed) => {
            let text: Vec<String> = placed
                .iter()
                .map(|(who, cpu)| format!("{who} on CPU {cpu}"))
                .collect();
            found.push_str(&format!("\nringkeeper.pinCores puts {}", text.join(", ")));
            let missing: BTreeSet<usize> = placed
                .iter()
                .map(|p| p.1)
                .filter(|cpu| !usable.is_empty() && !usable.contains(cpu))
                .collect();
            if !missing.is_empty() {
                status = Status::Fail;
                found.push_str(&format!(
                    "; CPU(s) {} are not online or not allowed for this process: the \
                     server cannot start those executors",
                    cpu_list_text(&missing.into_iter().collect::<Vec<_>>())
                ));
                fixes.push("list only online CPUs this process may use in ringkeeper.pinCores");
            }
            let mut cpus_used: Vec<usize> = placed.iter().map(|p| p.1).collect();
            cpus_used.sort_unstable();
            let distinct = {
                let mut d = cpus_used.clone();
                d.dedup();
                d.len()
            };
            if distinct < placed.len() {
                status = status.max(Status::Warn);
                found.push_str("; some executors share a CPU");
                fixes.push(
                    "give each executor a CPU of its own (ringkeeper.shards = CPUs listed - 1)",
                );
            }
            let core_cpu = placed[0].1;
            let core_load = l.load.get(&core_cpu).copied().unwrap_or(0);
            let quietest = placed
                .iter()
                .map(|p| l.load.get(&p.1).copied().unwrap_or(0))
                .min()
                .unwrap_or(0);
            if core_load > 0 && core_load > quietest.saturating_mul(2).max(1000) {
                status = status.max(Status::Warn);
                found.push_str(&format!(
                    "; the consensus core's CPU {core_cpu} takes {core_load} NIC interrupts, \
                     more than the others"
                ));
                fixes.push(
                    "move the NIC's IRQs off the consensus core's CPU (echo CPUs > \
                     /proc/irq/N/smp_affinity_list, irqbalance --banirq or IRQBALANCE_BANNED_CPULIST), \
                     or put the consensus core first in ringkeeper.pinCores on a quieter CPU",
                );
            }
        }
    }
    let p = l.plan();
    found.push_str(&format!(
        "\nsuggested: ringkeeper.pinCores={} ringkeeper.shards={} ({})",
        p.cpus
            .as_ref()
            .map(|c| c
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_else(|| "none".into()),
        p.shards,
        p.reason
    ));
    let c = c
        .status(status)
        .found(found)
        .value("online", Value::Int(l.online.len() as i64))
        .value("usable", Value::Text(cpu_list_text(&usable)))
        .value("isolated", Value::Text(cpu_list_text(&l.isolated)))
        .value(
            "nic_irqs",
            Value::Int(l.nics.iter().map(|n| n.irqs.len()).sum::<usize>() as i64),
        );
    if fixes.is_empty() {
        c.fix("`ringkeeper tune suggest` prints a pinning for this host with its reason")
    } else {
        c.fix(fixes.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n\
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
 38:          0      20330 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
 39:      15592          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
 41:      24403          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx\n\
 90:         7          9  IR-PCI-MSI 524289-edge      eth1-TxRx-0\n\
 91:         0          3  IR-PCI-MSI 524290-edge      mlx5_comp0@pci:0000:3b:00.0\n\
NMI:          0          0   Non-maskable interrupts\n\
ERR:          0\n";

    #[test]
    fn cpu_lists_parse_and_print() {
        assert_eq!(parse_cpu_list("0-3,5,7-8\n"), vec![0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_cpu_list("domain,managed_irq,2-3"), vec![2, 3]);
        assert_eq!(parse_cpu_list("1-7:2"), vec![1, 3, 5, 7]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
        assert_eq!(cpu_list_text(&[5, 0, 1, 2, 3, 7, 8]), "0-3,5,7-8");
        assert_eq!(cpu_list_text(&[]), "none");
        assert_eq!(
            cmdline_cpus("quiet isolcpus=domain,2-3 nohz_full=2-3", "isolcpus"),
            vec![2, 3]
        );
    }

    #[test]
    fn interrupts_parse_with_columns_and_short_lines() {
        let lines = parse_interrupts(INTERRUPTS);
        assert_eq!(lines.len(), 8);
        assert_eq!(lines[1].irq, "38");
        assert_eq!(lines[1].counts, vec![(0, 0), (1, 20330)]);
        assert_eq!(
            lines[1].desc,
            "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0"
        );
        assert_eq!(lines[6].irq, "NMI");
        assert_eq!(lines[6].number(), None);
        assert_eq!(lines[7].counts, vec![(0, 0)]);
        assert_eq!(lines[7].desc, "");
    }

    #[test]
    fn interrupts_with_an_offline_cpu_name_their_columns() {
        let text = "  CPU0 CPU2\n 5: 1 2 x y\n";
        assert_eq!(parse_interrupts(text)[0].counts, vec![(0, 1), (2, 2)]);
    }

    #[test]
    fn nic_interrupts_match_by_name_device_pci_or_msi() {
        let lines = parse_interrupts(INTERRUPTS);
        let of = |name, dev, pci, msi: &[u32]| -> Vec<String> {
            lines
                .iter()
                .filter(|l| l.number().is_some() && irq_matches(l, name, dev, pci, msi))
                .map(|l| l.irq.clone())
                .collect()
        };
        assert_eq!(
            of("eth0", "virtio2", Some("0000:00:03.0"), &[]),
            ["38", "39"]
        );
        assert_eq!(of("eth1", "0000:00:1f.6", None, &[]), ["90"]);
        assert_eq!(
            of("ens1", "0000:3b:00.0", Some("0000:3b:00.0"), &[]),
            ["91"]
        );
        assert_eq!(of("eth2", "x", None, &[24]), ["24"]);
        let load = nic_load(&[Nic {
            name: "eth0".into(),
            device: "virtio2".into(),
            irqs: lines[1..3].to_vec(),
            numa_node: None,
        }]);
        assert_eq!(load.get(&0), Some(&15592));
        assert_eq!(load.get(&1), Some(&20330));
    }

    #[test]
    fn plans_follow_cpus_isolation_and_interrupts() {
        let input = |usable: &[usize], isolated: &[usize]| PlanInput {
            usable: usable.to_vec(),
            isolated: isolated.to_vec(),
            load: [(0, 900), (1, 10), (2, 10), (3, 500)].into_iter().collect(),
            ..PlanInput::default()
        };
        let two = plan(&PlanInput {
            usable: vec![0, 1],
            ..PlanInput::default()
        });
        assert_eq!((two.cpus, two.shards), (None, 1));
        let four = plan(&input(&[0, 1, 2, 3], &[]));
        assert_eq!(four.cpus, Some(vec![2, 0, 1, 3]));
        assert_eq!(four.shards, 3);
        let iso = plan(&input(&[0, 1, 2, 3, 4, 5], &[3, 4, 5]));
        assert_eq!(iso.cpus, Some(vec![5, 3, 4]));
        assert_eq!(iso.shards, 2);
    }

    #[test]
    fn plans_keep_one_smt_thread_per_core_and_the_nics_node() {
        // 8 CPUs, siblings (0,4) (1,5) (2,6) (3,7): one thread per core.
        let core_of: BTreeMap<usize, usize> = (0..8).map(|c| (c, c % 4)).collect();
        let smt = plan(&PlanInput {
            usable: (0..8).collect(),
            core_of: core_of.clone(),
            ..PlanInput::default()
        });
        assert_eq!(smt.cpus, Some(vec![3, 0, 1, 2]));
        assert!(
            smt.reason.contains("one SMT thread per core"),
            "{}",
            smt.reason
        );
        // 4 cores with siblings are too few to drop the siblings from.
        let small = plan(&PlanInput {
            usable: vec![0, 1, 4, 5],
            core_of,
            ..PlanInput::default()
        });
        assert_eq!(small.cpus, Some(vec![5, 0, 1, 4]));
        // Two nodes of 6: the NIC's.
        let numa = plan(&PlanInput {
            usable: (0..12).collect(),
            nic_node: (6..12).collect(),
            ..PlanInput::default()
        });
        assert_eq!(numa.cpus, Some(vec![11, 6, 7, 8, 9, 10]));
        assert!(numa.reason.contains("NUMA node"), "{}", numa.reason);
    }

    #[test]
    fn configured_placement_follows_the_server() {
        let pin = CpuPinning::Cpus(vec![4, 5, 6]);
        assert_eq!(
            configured_placement(&pin, ConsensusExecutor::Own, 2).unwrap(),
            vec![
                ("consensus core".to_string(), 4),
                ("shard 0".to_string(), 5),
                ("shard 1".to_string(), 6)
            ]
        );
        let shared = configured_placement(&pin, ConsensusExecutor::Shared, 3).unwrap();
        assert_eq!(shared[0], ("shard 0 + consensus core".to_string(), 5));
        assert_eq!(shared[2], ("shard 2".to_string(), 4));
        assert_eq!(
            configured_placement(&CpuPinning::None, ConsensusExecutor::Own, 2),
            None
        );
    }
}

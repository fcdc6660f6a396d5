//! Seeded random op sequences over a small path space. Each side runs the
//! same generator (a pure function of the seed and of that side's own
//! replies, which are identical on both sides until the first mismatch) and
//! produces a transcript; the transcripts are compared afterwards.

use std::time::Instant;

use super::ops::{self, mode, Op, Parsed, Runner};
use super::wire::{op, Acl};
use super::Rng;

const NAMES: &[&str] = &["a", "b", "c"];
const BAD_PATHS: &[&str] = &["", "a", "/a/", "//a", "/a/./b", "/a/../b", "/.", "/a//b"];
/// Sessions: two that mostly write, one that mostly watches.
const ROLES: usize = 3;

struct Gen {
    rng: Rng,
    /// Sequential nodes created so far (most recent last).
    seq: Vec<String>,
    /// Current session name per role (a role is re-opened with a new name).
    names: Vec<String>,
    generation: Vec<u32>,
}

impl Gen {
    fn name(&mut self) -> &'static str {
        NAMES[self.rng.below(NAMES.len() as u64) as usize]
    }

    fn path(&mut self) -> String {
        if !self.seq.is_empty() && self.rng.chance(20) {
            let base = self.rng.pick(&self.seq).clone();
            if self.rng.chance(30) {
                let n = self.name();
                return format!("{base}/{n}");
            }
            return base;
        }
        let depth = 1 + self.rng.below(3);
        let mut p = String::new();
        for _ in 0..depth {
            p.push('/');
            p.push_str(self.name());
        }
        p
    }

    /// A path or, rarely, an invalid one or the root.
    fn any_path(&mut self) -> String {
        match self.rng.below(100) {
            0 => (*self.rng.pick(BAD_PATHS)).to_string(),
            1 => "/".into(),
            _ => self.path(),
        }
    }

    fn data(&mut self) -> String {
        if self.rng.chance(10) {
            String::new()
        } else {
            format!("d{}", self.rng.below(100))
        }
    }

    fn version(&mut self) -> i32 {
        if self.rng.chance(50) {
            -1
        } else {
            self.rng.below(4) as i32
        }
    }

    fn create_op(&mut self, in_multi: bool) -> Op {
        let path = self.any_path();
        let data = self.data();
        let r = self.rng.below(100);
        let (flags, container) = match r {
            0..=29 => (mode::PERSISTENT, false),
            30..=49 => (mode::EPHEMERAL, false),
            50..=64 => (mode::SEQUENTIAL, false),
            65..=79 => (mode::EPHEMERAL_SEQUENTIAL, false),
            _ => (mode::CONTAINER, true),
        };
        if container {
            return ops::container(&path);
        }
        // Sequential creates under a fresh prefix, or as the child of a
        // sequential node.
        let opcode = if !in_multi && self.rng.chance(25) {
            op::CREATE
        } else {
            op::CREATE2
        };
        Op::Create {
            opcode,
            path,
            data: data.into_bytes(),
            acl: Acl::open(),
            flags,
            ttl: 0,
        }
    }

    fn multi_sub(&mut self) -> Op {
        match self.rng.below(10) {
            0..=3 => self.create_op(true),
            4..=5 => ops::delete(&self.any_path(), self.version()),
            6..=7 => {
                let (p, d, v) = (self.any_path(), self.data(), self.version());
                ops::set(&p, &d, v)
            }
            _ => ops::check(&self.any_path(), self.version()),
        }
    }

    fn next_op(&mut self, role: usize) -> Op {
        let watcher = role == ROLES - 1;
        let watch = self.rng.chance(if watcher { 70 } else { 15 });
        let r = self.rng.below(1000);
        // The watcher role mostly reads.
        let r = if watcher && r < 500 && self.rng.chance(70) {
            500 + self.rng.below(250)
        } else {
            r
        };
        match r {
            0..=249 => self.create_op(false),
            250..=379 => ops::delete(&self.any_path(), self.version()),
            380..=499 => {
                let (p, d, v) = (self.any_path(), self.data(), self.version());
                ops::set(&p, &d, v)
            }
            500..=579 => ops::get(&self.any_path(), watch),
            580..=659 => ops::exists(&self.any_path(), watch),
            660..=709 => ops::children(&self.any_path(), watch),
            710..=759 => ops::children2(&self.any_path(), watch),
            760..=839 => {
                let n = 1 + self.rng.below(4);
                Op::Multi((0..n).map(|_| self.multi_sub()).collect())
            }
            840..=869 => {
                let n = 1 + self.rng.below(3);
                Op::MultiRead(
                    (0..n)
                        .map(|_| {
                            let p = self.any_path();
                            if self.rng.chance(50) {
                                ops::get(&p, false)
                            } else {
                                ops::children(&p, false)
                            }
                        })
                        .collect(),
                )
            }
            870..=889 => Op::GetAllChildrenNumber {
                path: self.any_path(),
            },
            890..=909 => {
                let p = if self.rng.chance(30) {
                    "/".to_string()
                } else {
                    self.path()
                };
                Op::GetEphemerals { prefix: p }
            }
            910..=919 => Op::AddWatch {
                path: self.path(),
                mode: self.rng.below(2) as i32,
            },
            920..=934 => Op::RemoveWatches {
                path: self.path(),
                typ: 1 + self.rng.below(5) as i32,
            },
            935..=944 => Op::CheckWatches {
                path: self.path(),
                typ: 1 + self.rng.below(5) as i32,
            },
            945..=959 => ops::sync(&self.any_path()),
            960..=979 => Op::GetAcl {
                path: self.any_path(),
            },
            _ => Op::SetAcl {
                path: self.any_path(),
                acl: if self.rng.chance(80) {
                    Acl::open()
                } else {
                    vec![
                        Acl::new(31, "world", "anyone"),
                        Acl::new(31, "ip", "127.0.0.1"),
                    ]
                },
                version: self.version(),
            },
        }
    }

    fn learn(&mut self, o: &Op, p: &Parsed) {
        if !p.ok() {
            return;
        }
        match o {
            Op::Create { flags, .. } if flags & 2 == 2 => {
                if let Some(path) = &p.path {
                    self.seq.push(path.clone());
                }
            }
            Op::Delete { path, .. } => self.seq.retain(|s| s != path),
            Op::Multi(subs) => {
                for (sub, (_, _, created)) in subs.iter().zip(p.subs.iter()) {
                    match sub {
                        Op::Create { flags, .. } if flags & 2 == 2 => {
                            if let Some(c) = created {
                                self.seq.push(c.clone());
                            }
                        }
                        Op::Delete { path, .. } => self.seq.retain(|s| s != path),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if self.seq.len() > 40 {
            self.seq.remove(0);
        }
    }
}

/// Runs `nops` random ops against `addr`; returns the transcript. Every line
/// starts with `#<op index>`.
pub fn run_side(addr: &str, seed: u64, nops: usize, deadline: Instant) -> Vec<String> {
    let mut r = Runner::new(addr);
    let mut g = Gen {
        rng: Rng::new(seed),
        seq: Vec::new(),
        names: (0..ROLES).map(|i| format!("S{i}")).collect(),
        generation: vec![0; ROLES],
    };
    r.tag = "#setup".into();
    for n in g.names.clone() {
        r.open(&n);
    }
    for i in 0..nops {
        if Instant::now() > deadline {
            r.tag = format!("#{i}");
            r.note("DEADLINE REACHED: stopping");
            break;
        }
        r.tag = format!("#{i}");
        // Occasionally end a writer session (its ephemerals go away) and
        // open a new one for that role.
        if g.rng.below(1000) < 3 {
            let role = g.rng.below(ROLES as u64 - 1) as usize;
            let old = g.names[role].clone();
            r.close(&old);
            g.generation[role] += 1;
            g.names[role] = format!("S{role}g{}", g.generation[role]);
            let new = g.names[role].clone();
            r.open(&new);
            continue;
        }
        let role = match g.rng.below(100) {
            0..=44 => 0,
            45..=79 => 1,
            _ => 2,
        };
        let o = g.next_op(role);
        let who = g.names[role].clone();
        let p = r.run(&who, &o);
        g.learn(&o, &p);
    }
    r.tag = "#end".into();
    for n in g.names.clone() {
        r.drain(&n);
    }
    for n in g.names.clone() {
        r.close(&n);
    }
    r.out
}

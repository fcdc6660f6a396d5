//! Elections of 3, 5 or 7 voters over a simulated network: each message is
//! delivered after a random delay of 0..=`max_delay_ticks` (so in any
//! order), some are duplicated, and before `stable_after_ticks` some are
//! lost and a minority may be cut off. Servers start with random logs.
//!
//! Election alone can end split: servers that counted a quorum for a vote
//! follow a server that, in its finalize wait, adopted a better vote and
//! never leads. ZooKeeper gets out through the learner protocol's
//! timeouts, and so does the simulation, abstractly: a follower whose
//! leader is not leading, and a leader without a quorum of followers,
//! start a new round after `init_limit_ticks` (initLimit).
//!
//! Checked: `decide_within_ticks` after the network is stable, every
//! server has decided, one leader leads and every other server follows it;
//! with no loss and delays below the finalize wait, that leader is the best
//! vote (highest epoch, zxid, sid).

use std::collections::{BTreeMap, BTreeSet};

use super::Rng;
use crate::zab::election::{Election, Notification, Out, PeerState, Timing, Vote};
use crate::zab::Sid;

#[derive(Clone, Debug)]
pub struct Params {
    pub voters: usize,
    pub max_delay_ticks: u64,
    pub duplicate_percent: u64,
    /// Loss before the network is stable.
    pub loss_percent: u64,
    /// Whether a minority is cut off before the network is stable.
    pub partition: bool,
    pub stable_after_ticks: u64,
    /// Every server must have decided this long after the network is stable.
    pub decide_within_ticks: u64,
    /// How long a follower waits for its leader to lead, and a leader for a
    /// quorum of followers, before looking again.
    pub init_limit_ticks: u64,
    pub timing: Timing,
}

impl Params {
    /// The run of `seed`: its size and faults drawn from the seed.
    pub fn for_seed(seed: u64) -> Params {
        let mut rng = Rng::new(seed ^ 0x5151_5151);
        let voters = [3, 5, 7][rng.below(3) as usize];
        let lossy = rng.chance(50);
        let timing = Timing {
            finalize_wait_ticks: 20,
            min_not_timeout_ticks: 20,
            max_not_timeout_ticks: 640,
        };
        Params {
            voters,
            max_delay_ticks: if lossy {
                30
            } else {
                rng.below(timing.finalize_wait_ticks as u64)
            },
            duplicate_percent: rng.below(20),
            loss_percent: if lossy { rng.below(40) } else { 0 },
            partition: lossy && rng.chance(50),
            stable_after_ticks: if lossy { 200 + rng.below(800) } else { 0 },
            decide_within_ticks: 3_000,
            init_limit_ticks: 100,
            timing,
        }
    }

    fn reliable(&self) -> bool {
        self.loss_percent == 0
            && !self.partition
            && self.max_delay_ticks < self.timing.finalize_wait_ticks as u64
    }
}

struct InFlight {
    at: u64,
    from: Sid,
    to: Sid,
    n: Notification,
}

/// One run; `Err` says which invariant broke, at which tick.
pub fn run(seed: u64) -> Result<Summary, String> {
    let p = Params::for_seed(seed);
    let mut rng = Rng::new(seed);
    let sids: Vec<Sid> = (1..=p.voters as Sid).collect();
    let voters: BTreeSet<Sid> = sids.iter().copied().collect();
    // Logs: a few epochs and zxids, ties likely.
    let own: BTreeMap<Sid, Vote> = sids
        .iter()
        .map(|s| {
            let epoch = rng.below(3) as u32;
            let zxid = ((epoch as i64) << 32) | rng.below(4) as i64;
            (
                *s,
                Vote {
                    leader: *s,
                    zxid,
                    peer_epoch: epoch,
                },
            )
        })
        .collect();
    // The best vote by ZooKeeper's order, stated here on its own: epoch,
    // then zxid, then sid.
    let best = *own
        .values()
        .max_by_key(|v| (v.peer_epoch, v.zxid, v.leader))
        .expect("voters");
    let cut_off: BTreeSet<Sid> = if p.partition {
        let k = rng.below((p.voters / 2) as u64 + 1);
        sids.iter().copied().take(k as usize).collect()
    } else {
        BTreeSet::new()
    };
    let mut servers: BTreeMap<Sid, Election> = sids
        .iter()
        .map(|s| (*s, Election::new(*s, voters.clone(), p.timing)))
        .collect();
    let mut net: Vec<InFlight> = Vec::new();
    let mut decisions: BTreeMap<Sid, Vote> = BTreeMap::new();
    // When each server decided (for the initLimit timeouts).
    let mut decided_at: BTreeMap<Sid, u64> = BTreeMap::new();
    let mut sent = 0u64;
    let post =
        |net: &mut Vec<InFlight>, rng: &mut Rng, now: u64, from: Sid, out: Out, sent: &mut u64| {
            for (to, n) in out.send {
                *sent += 1;
                let unstable = now < p.stable_after_ticks;
                if unstable
                    && (rng.chance(p.loss_percent)
                        || cut_off.contains(&from) != cut_off.contains(&to))
                {
                    continue;
                }
                let copies = if rng.chance(p.duplicate_percent) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let at = now + rng.below(p.max_delay_ticks + 1);
                    net.push(InFlight { at, from, to, n });
                }
            }
        };
    let note = |decisions: &mut BTreeMap<Sid, Vote>,
                decided_at: &mut BTreeMap<Sid, u64>,
                sid: Sid,
                out: &Out,
                now: u64| {
        if let Some(d) = out.decided {
            decisions.insert(sid, d.vote);
            decided_at.insert(sid, now);
        }
    };
    for s in &sids {
        let out = servers
            .get_mut(s)
            .expect("server")
            .start(own[s].zxid, own[s].peer_epoch);
        post(&mut net, &mut rng, 0, *s, out, &mut sent);
    }
    let deadline = p.stable_after_ticks + p.decide_within_ticks;
    let mut now = 0u64;
    while now <= deadline {
        // Deliver what is due, in a random order among the due.
        let mut due: Vec<InFlight> = Vec::new();
        let mut i = 0;
        while i < net.len() {
            if net[i].at <= now {
                due.push(net.swap_remove(i));
            } else {
                i += 1;
            }
        }
        while !due.is_empty() {
            let m = due.swap_remove(rng.below(due.len() as u64) as usize);
            let out = servers.get_mut(&m.to).expect("server").receive(m.from, m.n);
            note(&mut decisions, &mut decided_at, m.to, &out, now);
            post(&mut net, &mut rng, now, m.to, out, &mut sent);
        }
        for s in &sids {
            let out = servers.get_mut(s).expect("server").tick();
            note(&mut decisions, &mut decided_at, *s, &out, now);
            post(&mut net, &mut rng, now, *s, out, &mut sent);
        }
        // The learner protocol, abstractly: who is established, and who
        // gives up and looks again.
        let reachable = |a: Sid, b: Sid| {
            now >= p.stable_after_ticks || cut_off.contains(&a) == cut_off.contains(&b)
        };
        let established = established_leaders(&servers, &decisions, reachable);
        let mut restart = Vec::new();
        for (s, v) in &decisions {
            let ok = established.contains(&v.leader) && reachable(*s, v.leader);
            if !ok && now - decided_at[s] >= p.init_limit_ticks {
                restart.push(*s);
            }
        }
        for s in restart {
            decisions.remove(&s);
            decided_at.remove(&s);
            let out = servers
                .get_mut(&s)
                .expect("server")
                .start(own[&s].zxid, own[&s].peer_epoch);
            post(&mut net, &mut rng, now, s, out, &mut sent);
        }
        let established = established_leaders(&servers, &decisions, reachable);
        let settled = decisions.len() == sids.len()
            && decisions.values().all(|v| established.contains(&v.leader));
        if settled && now >= p.stable_after_ticks {
            break;
        }
        now += 1;
    }
    let leaders: BTreeSet<Sid> = decisions.values().map(|v| v.leader).collect();
    if decisions.len() < sids.len() || leaders.len() != 1 {
        let states: Vec<String> = servers
            .iter()
            .map(|(s, e)| format!("{s}: {:?} round {} {:?}", e.state(), e.round(), e.decided()))
            .collect();
        return Err(format!(
            "not one leader followed by all {} ticks after the network became stable \
             ({p:?}; cut off before: {cut_off:?}): {states:?}",
            p.decide_within_ticks
        ));
    }
    for (sid, v) in &decisions {
        if p.reliable() && *v != best {
            return Err(format!(
                "server {sid} decided {v:?}, not the best vote {best:?}, on a network with no \
                 loss and delays below the finalize wait ({p:?})"
            ));
        }
        // A leader's own vote is always for itself.
        if servers[sid].state() == PeerState::Leading && v.leader != *sid {
            return Err(format!("server {sid} leads a vote for {}", v.leader));
        }
    }
    Ok(Summary {
        voters: p.voters,
        ticks: now,
        messages: sent,
        leader: *leaders.first().expect("one leader"),
    })
}

/// Leaders that lead and have a quorum of followers they can reach.
fn established_leaders(
    servers: &BTreeMap<Sid, Election>,
    decisions: &BTreeMap<Sid, Vote>,
    reachable: impl Fn(Sid, Sid) -> bool,
) -> BTreeSet<Sid> {
    servers
        .iter()
        .filter(|(l, e)| {
            let followers = decisions
                .iter()
                .filter(|(f, v)| *f != *l && v.leader == **l && reachable(**f, **l))
                .count();
            e.state() == PeerState::Leading && (followers + 1) * 2 > servers.len()
        })
        .map(|(l, _)| *l)
        .collect()
}

#[derive(Debug)]
pub struct Summary {
    pub voters: usize,
    pub ticks: u64,
    pub messages: u64,
    pub leader: Sid,
}

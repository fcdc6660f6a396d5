//! The separator names of one inner node of the child index, back to back
//! in one buffer.
//!
//! Why not one allocation per name: a lookup's binary search then touches
//! one scattered block per probe (a cache miss each, on a big tree), and
//! copying an inner node for a new tree version bumps a reference count in
//! every one of them. Here the probes stay inside contiguous arrays and a
//! copy is three memcpys.
//!
//! Each name's 8-byte [`head`] is also kept in an array of its own, so
//! that a binary search reads one u64 per probe from one 512-byte array
//! (64 names) and reads a name itself only when its head ties with the
//! one searched for. Reading the name's bounds and then its bytes for
//! every probe was two dependent loads in two buffers; at 5M znodes over
//! 100 parents that search was the thread's largest grower against 10k
//! (perf, `tuning/scale.md`).

/// Names `0..len()`, name `i` at `bytes[start(i)..ends[i]]`, its head at
/// `heads[i]`.
#[derive(Default)]
pub struct Separators {
    bytes: Vec<u8>,
    ends: Vec<u32>,
    heads: Vec<u64>,
}

impl Clone for Separators {
    /// Copies with a little room, so that the insert that usually follows
    /// a copy does not regrow the buffer.
    fn clone(&self) -> Self {
        let mut bytes = Vec::with_capacity(self.bytes.len() + self.bytes.len() / 8 + 32);
        bytes.extend_from_slice(&self.bytes);
        let mut ends = Vec::with_capacity(self.ends.len() + 1);
        ends.extend_from_slice(&self.ends);
        let mut heads = Vec::with_capacity(self.heads.len() + 1);
        heads.extend_from_slice(&self.heads);
        Separators { bytes, ends, heads }
    }
}

/// Bytes of a name that [`head`] keeps (the leaves' heads are the same).
pub(super) const HEAD_BYTES: usize = 8;

/// The first 8 bytes of `name`, big-endian, zero-padded. Where two
/// heads differ they order their names (the first differing byte is a real
/// byte of the greater name), so most probes of a search decide on one
/// integer compare instead of a call to memcmp.
/// (A shorter name is shifted in byte by byte: a copy of a variable
/// length was a call to memcpy.)
#[inline]
pub(super) fn head(name: &[u8]) -> u64 {
    const _: () = assert!(HEAD_BYTES == 8, "a head is one u64");
    match name.first_chunk::<8>() {
        Some(b) => u64::from_be_bytes(*b),
        None => name
            .iter()
            .enumerate()
            .fold(0, |h, (i, &c)| h | u64::from(c) << (56 - 8 * i)),
    }
}

impl Separators {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.start(i)..self.ends[i] as usize]
    }

    /// The index of the last name <= `name` (0 when there is none). Heads
    /// are in order (the names are), and where two heads differ they order
    /// their names: a probe reads the name only on a tie.
    pub fn last_at_most(&self, name: &[u8]) -> usize {
        let key = head(name);
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let h = self.heads[mid];
            let at_most = if h != key {
                h < key
            } else {
                self.get(mid) <= name
            };
            if at_most {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.saturating_sub(1)
    }

    /// Puts `name` at `i`, in place of the name there when `replace`.
    fn splice(&mut self, i: usize, name: &[u8], replace: bool) {
        let (start, old_end) = if replace {
            (self.start(i), self.ends[i] as usize)
        } else {
            let s = self.start(i);
            (s, s)
        };
        let new_end = start + name.len();
        let total = u32::try_from(self.bytes.len() - (old_end - start) + name.len())
            .expect("separators of one node under 4 GiB");
        self.bytes.splice(start..old_end, name.iter().copied());
        let delta = new_end as i64 - old_end as i64;
        if replace {
            self.ends[i] = new_end as u32;
            self.heads[i] = head(name);
        } else {
            self.ends.insert(i, new_end as u32);
            self.heads.insert(i, head(name));
        }
        for e in &mut self.ends[i + 1..] {
            *e = (*e as i64 + delta) as u32;
        }
        debug_assert_eq!(self.ends.last().copied(), Some(total));
    }

    pub fn set(&mut self, i: usize, name: &[u8]) {
        self.splice(i, name, true);
    }

    pub fn insert(&mut self, i: usize, name: &[u8]) {
        self.splice(i, name, false);
    }

    pub fn remove(&mut self, i: usize) {
        let (start, end) = (self.start(i), self.ends[i] as usize);
        self.bytes.drain(start..end);
        self.ends.remove(i);
        self.heads.remove(i);
        let cut = (end - start) as u32;
        for e in &mut self.ends[i..] {
            *e -= cut;
        }
    }

    pub fn push(&mut self, name: &[u8]) {
        self.insert(self.len(), name);
    }

    /// Moves names `at..` into a new set.
    pub fn split_off(&mut self, at: usize) -> Separators {
        let base = self.start(at);
        let right = Separators {
            bytes: self.bytes.split_off(base),
            ends: self
                .ends
                .split_off(at)
                .iter()
                .map(|e| e - base as u32)
                .collect(),
            heads: self.heads.split_off(at),
        };
        self.bytes
            .shrink_to(self.bytes.len() + self.bytes.len() / 8 + 32);
        right
    }

    /// Appends the names of `more` after these.
    pub fn extend(&mut self, more: &Separators) {
        let base = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&more.bytes);
        self.ends.extend(more.ends.iter().map(|e| e + base));
        self.heads.extend_from_slice(&more.heads);
    }

    /// Every head is its name's, and heads and bounds are one per name.
    #[cfg(test)]
    pub(super) fn check(&self) {
        assert_eq!(self.heads.len(), self.ends.len());
        for i in 0..self.len() {
            assert_eq!(self.heads[i], head(self.get(i)), "head {i}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &Separators) -> Vec<Vec<u8>> {
        s.check();
        (0..s.len()).map(|i| s.get(i).to_vec()).collect()
    }

    /// Against a Vec of names, through every operation at every position.
    #[test]
    fn matches_a_vec_of_names() {
        let mut s = Separators::default();
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let name = format!("k{}", "x".repeat((x % 23) as usize)).into_bytes();
            let at = if model.is_empty() {
                0
            } else {
                (x >> 8) as usize % model.len()
            };
            match (x >> 40) % 6 {
                0 | 1 => {
                    s.insert(at, &name);
                    model.insert(at, name);
                }
                2 if !model.is_empty() => {
                    s.set(at, &name);
                    model[at] = name;
                }
                3 if !model.is_empty() => {
                    s.remove(at);
                    model.remove(at);
                }
                4 if model.len() > 1 => {
                    let mut right = s.split_off(at);
                    let right_model = model.split_off(at);
                    assert_eq!(names(&right), right_model);
                    right.push(&name);
                    let copy = right.clone();
                    s.extend(&copy);
                    model.extend(right_model);
                    model.push(name);
                }
                _ => {
                    s.push(&name);
                    model.push(name);
                }
            }
            assert_eq!(s.len(), model.len(), "round {round}");
            if round % 97 == 0 {
                assert_eq!(names(&s), model, "round {round}");
            }
        }
        assert_eq!(names(&s), model);
    }

    #[test]
    fn last_at_most_finds_the_range() {
        let mut s = Separators::default();
        for n in ["b", "d", "f"] {
            s.push(n.as_bytes());
        }
        assert_eq!(s.last_at_most(b"a"), 0);
        assert_eq!(s.last_at_most(b"b"), 0);
        assert_eq!(s.last_at_most(b"c"), 0);
        assert_eq!(s.last_at_most(b"d"), 1);
        assert_eq!(s.last_at_most(b"e"), 1);
        assert_eq!(s.last_at_most(b"f"), 2);
        assert_eq!(s.last_at_most(b"zz"), 2);
    }

    /// last_at_most against a linear scan of sorted names that tie on their
    /// 8-byte heads, end inside them, or hold NUL bytes.
    #[test]
    fn last_at_most_matches_a_scan() {
        let pool: Vec<&[u8]> = vec![
            b"a",
            b"ab",
            b"ab\0",
            b"ab\0c",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefghij",
            b"abcdefgi",
            b"n500005",
            b"n5000005",
            b"n50000005",
            b"n5000006",
            b"z",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..500 {
            let mut names: Vec<&[u8]> = pool
                .iter()
                .copied()
                .filter(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    !x.is_multiple_of(3)
                })
                .collect();
            names.sort();
            let mut s = Separators::default();
            for n in &names {
                s.push(n);
            }
            s.check();
            for q in &pool {
                let want = names.iter().rposition(|n| n <= q).unwrap_or(0);
                assert_eq!(s.last_at_most(q), want, "{q:?} in {names:?}");
            }
        }
    }
}

//! Equally spaced alignments (`align-equal-compiled`): Kaldi's `EqualAlign`
//! (`fstext/fstext-utils-inl.h`) draws a random path through the training
//! graph with glibc's `rand()` seeded per utterance from the key
//! (`StringHasher`), then spreads the frames over the self-loops of the
//! states on that path. The generator and the hash are reproduced here so
//! the alignments are Kaldi's.

use amtool_formats::kaldi::fst::{StdVectorFst, TropicalWeight};
use amtool_formats::kaldi::lattice::FstWeight;

/// Kaldi's `StringHasher` (`util/stl-utils.h`): `h = h·7853 + c` over the
/// key's bytes (as signed chars) in 64-bit arithmetic, truncated to the
/// `int32` seed align-equal-compiled passes to `srand`.
pub fn key_seed(key: &str) -> i32 {
    let mut h: u64 = 0;
    for &c in key.as_bytes() {
        h = h.wrapping_mul(7853).wrapping_add(c as i8 as i64 as u64);
    }
    h as i32
}

/// glibc's `srand`/`rand` (the TYPE_3 additive feedback generator,
/// `random_r.c`): state seeded by a Lehmer generator, 310 outputs discarded.
pub struct GlibcRand {
    r: [u32; 34],
    i: usize,
}

impl GlibcRand {
    pub fn new(seed: u32) -> Self {
        let seed = if seed == 0 { 1 } else { seed };
        let mut r = [0u32; 34];
        let mut word = seed as i32 as i64;
        r[0] = word as u32;
        for slot in r.iter_mut().take(31).skip(1) {
            // Schrage's method, as glibc computes 16807·word mod (2³¹ − 1).
            let hi = word / 127_773;
            let lo = word % 127_773;
            word = 16_807 * lo - 2_836 * hi;
            if word < 0 {
                word += 2_147_483_647;
            }
            *slot = word as u32;
        }
        for k in 31..34 {
            r[k] = r[k - 31];
        }
        let mut g = GlibcRand { r, i: 34 };
        for _ in 0..310 {
            g.step();
        }
        g
    }

    fn step(&mut self) -> u32 {
        // r[i] = r[i − 31] + r[i − 3], over a ring of 34.
        let v = self.r[(self.i + 34 - 31) % 34].wrapping_add(self.r[(self.i + 34 - 3) % 34]);
        self.r[self.i % 34] = v;
        self.i = self.i % 34 + 1;
        v
    }

    /// `rand()`: 0 ..= 2³¹ − 1.
    pub fn next_rand(&mut self) -> i32 {
        (self.step() >> 1) as i32
    }

    /// Kaldi `RandInt(min, max)`: `min + rand() % (max − min + 1)`, and no
    /// draw at all when `min == max`.
    pub fn rand_int(&mut self, min: i32, max: i32) -> i32 {
        if min == max {
            return min;
        }
        min + self.next_rand() % (max + 1 - min)
    }
}

/// Why an equal alignment could not be made (Kaldi's warnings).
#[derive(Debug, Clone, PartialEq)]
pub enum EqualAlignError {
    EmptyGraph,
    /// Every drawn path had more input labels than frames.
    TooFewFrames {
        lengths: Vec<i32>,
        frames: usize,
    },
    NoSelfLoops,
    /// The walk did not end (a state that cannot reach a final state).
    NotCoaccessible,
}

impl std::fmt::Display for EqualAlignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EqualAlignError::EmptyGraph => write!(f, "Empty input fst."),
            EqualAlignError::TooFewFrames { lengths, frames } => {
                let l: Vec<String> = lengths.iter().map(|x| x.to_string()).collect();
                write!(
                    f,
                    "EqualAlign: the randomly constructed paths lengths: {}; utterance has too few frames {frames} to align.",
                    l.join(",")
                )
            }
            EqualAlignError::NoSelfLoops => {
                write!(f, "No self-loops on chosen path; cannot match length.")
            }
            EqualAlignError::NotCoaccessible => write!(
                f,
                "the graph has states that cannot reach a final state (EqualAlign needs a coaccessible FST)"
            ),
        }
    }
}

/// The first self-loop of `s` with an input label (`FindSelfLoopWithILabel`).
fn self_loop(fst: &StdVectorFst, s: usize) -> Option<usize> {
    fst.states[s]
        .arcs
        .iter()
        .position(|a| a.nextstate as usize == s && a.ilabel != 0)
}

/// Kaldi `EqualAlign(ifst, length, rand_seed, &path, 10)` followed by
/// `GetLinearSymbolSequence`: the transition-ids of an alignment of `frames`
/// frames.
pub fn equal_align(
    fst: &StdVectorFst,
    frames: usize,
    seed: i32,
) -> Result<Vec<i32>, EqualAlignError> {
    const NUM_RETRIES: usize = 10;
    if fst.start < 0 || fst.states.is_empty() {
        return Err(EqualAlignError::EmptyGraph);
    }
    let mut rng = GlibcRand::new(seed as u32);
    let zero = TropicalWeight::zero();
    // A bound on the walk so a graph with a dead end cannot loop forever.
    let max_steps = 1000 * (fst.num_arcs() + fst.states.len()) + 100_000;
    let mut lengths = Vec::new();
    let (mut path, mut offsets);
    let mut num_ilabels;
    loop {
        path = vec![fst.start as usize];
        offsets = Vec::new();
        num_ilabels = 0i64;
        let mut steps = 0usize;
        loop {
            steps += 1;
            if steps > max_steps {
                return Err(EqualAlignError::NotCoaccessible);
            }
            let s = *path.last().unwrap_or(&0);
            let num_arcs = fst.states[s].arcs.len();
            let tot = num_arcs + usize::from(fst.states[s].final_weight != zero);
            if tot == 0 {
                return Err(EqualAlignError::NotCoaccessible);
            }
            let off = rng.rand_int(0, tot as i32 - 1) as usize;
            if off >= num_arcs {
                break;
            }
            let arc = &fst.states[s].arcs[off];
            if arc.nextstate as usize == s {
                continue;
            }
            offsets.push(off);
            path.push(arc.nextstate as usize);
            if arc.ilabel != 0 {
                num_ilabels += 1;
            }
        }
        lengths.push(num_ilabels as i32);
        if !(lengths.len() < NUM_RETRIES && num_ilabels > frames as i64) {
            break;
        }
    }
    if num_ilabels > frames as i64 {
        return Err(EqualAlignError::TooFewFrames { lengths, frames });
    }
    let loops: Vec<Option<usize>> = path.iter().map(|&s| self_loop(fst, s)).collect();
    let num_self_loops = loops.iter().filter(|l| l.is_some()).count() as i64;
    if num_self_loops == 0 && num_ilabels < frames as i64 {
        return Err(EqualAlignError::NoSelfLoops);
    }
    let num_extra = frames as i64 - num_ilabels;
    let min_loops = if num_extra != 0 {
        num_extra / num_self_loops
    } else {
        0
    };
    let one_more = num_extra - min_loops * num_self_loops;
    let mut ali = Vec::with_capacity(frames);
    let mut counter = 0i64;
    for (i, &s) in path.iter().enumerate() {
        if let Some(l) = loops[i] {
            let n = min_loops + i64::from(counter < one_more);
            counter += 1;
            let tid = fst.states[s].arcs[l].ilabel;
            ali.extend(std::iter::repeat_n(tid, n as usize));
        }
        if i + 1 < path.len() {
            let tid = fst.states[s].arcs[offsets[i]].ilabel;
            if tid != 0 {
                ali.push(tid);
            }
        }
    }
    Ok(ali)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_rand_sequences() {
        // glibc: srand(1); rand() → 1804289383, 846930886, 1681692777.
        let mut g = GlibcRand::new(1);
        assert_eq!(
            [g.next_rand(), g.next_rand(), g.next_rand()],
            [1804289383, 846930886, 1681692777]
        );
        // srand(0) is srand(1).
        assert_eq!(GlibcRand::new(0).next_rand(), 1804289383);
    }

    #[test]
    fn string_hasher() {
        assert_eq!(key_seed(""), 0);
        assert_eq!(key_seed("a"), 97);
        assert_eq!(key_seed("ab"), 97 * 7853 + 98);
    }
}

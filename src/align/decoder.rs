//! Kaldi's `FasterDecoder` (`decoder/faster-decoder.cc`) over a
//! [`DecodingGraph`], reproduced step for step so that alignments are
//! Kaldi's: token costs in double, acoustic costs in float, the same beam,
//! min-active and adaptive-beam cutoffs, and the same order of token
//! processing — Kaldi's `HashList` keeps tokens in a list grouped by hash
//! bucket (buckets in order of first use, tokens in insertion order within
//! one), the order ties and running cutoffs depend on. That list is emulated
//! exactly ([`TokenList`]), including the hash size growing with the number
//! of active tokens and carrying over to a retry.

use super::graph::DecodingGraph;

/// `FasterDecoderOptions` (gmm-align-compiled leaves all but the beam at
/// their defaults).
#[derive(Debug, Clone, Copy)]
pub struct DecoderOptions {
    pub beam: f32,
    pub max_active: i32,
    pub min_active: i32,
    pub beam_delta: f32,
    pub hash_ratio: f32,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        DecoderOptions {
            beam: 16.0,
            max_active: i32::MAX,
            min_active: 20,
            beam_delta: 0.5,
            hash_ratio: 2.0,
        }
    }
}

/// Per-frame acoustic costs: `cost(frame, column)` = −(scaled
/// log-likelihood of the pdf an emitting arc's `column` names), Kaldi's
/// `-decodable->LogLikelihood`. A source may compute a cost when it is first
/// asked for (as Kaldi's decodable does): the search asks, frame by frame,
/// for the costs of the emitting arcs it follows, and only those.
pub trait AcousticCosts {
    fn num_frames(&self) -> usize;
    fn cost(&mut self, frame: usize, column: u32) -> f32;
}

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Token {
    cost: f64,
    ilabel: i32,
    graph_cost: f32,
    prev: u32,
}

#[derive(Debug, Clone, Copy)]
struct Elem {
    key: u32,
    tok: u32,
    tail: u32,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    last: u32,
    prev_bucket: u32,
}

/// `a % d` for a fixed `d` by multiplications (Lemire, Kaser and Kurz,
/// "Faster remainder by direct computation", 2019): exact for 32-bit `a`
/// and `d`; a division for a larger `d`.
#[derive(Debug, Clone, Copy)]
struct FastMod {
    m: u64,
}

impl FastMod {
    fn new(d: usize) -> Self {
        FastMod {
            m: (u64::MAX / d.max(1) as u64).wrapping_add(1),
        }
    }

    #[inline]
    fn of(&self, a: u32, d: usize) -> usize {
        if d > u32::MAX as usize {
            return a as usize % d;
        }
        let low = self.m.wrapping_mul(a as u64);
        ((low as u128 * d as u128) >> 64) as usize
    }
}

/// Kaldi's `HashList<StateId, Token*>`: the current frame's elements (an
/// arena, linked through `tail`) and the buckets indexing them.
struct TokenList {
    elems: Vec<Elem>,
    head: u32,
    buckets: Vec<Bucket>,
    hash_size: usize,
    hash_mod: FastMod,
    bucket_tail: u32,
    /// The previous frame's element arena, emptied, for reuse.
    spare: Vec<Elem>,
}

impl TokenList {
    fn new() -> Self {
        let mut l = TokenList {
            elems: Vec::new(),
            head: NONE,
            buckets: Vec::new(),
            hash_size: 0,
            hash_mod: FastMod::new(1),
            bucket_tail: NONE,
            spare: Vec::new(),
        };
        l.set_size(1000);
        l
    }

    fn set_size(&mut self, size: usize) {
        self.hash_size = size;
        self.hash_mod = FastMod::new(size);
        if size > self.buckets.len() {
            self.buckets.resize(
                size,
                Bucket {
                    last: NONE,
                    prev_bucket: NONE,
                },
            );
        }
    }

    /// `Clear`: empties the index; returns the old elements and list head.
    fn clear(&mut self) -> (Vec<Elem>, u32) {
        let mut b = self.bucket_tail;
        while b != NONE {
            let bk = &mut self.buckets[b as usize];
            bk.last = NONE;
            b = bk.prev_bucket;
        }
        self.bucket_tail = NONE;
        let head = std::mem::replace(&mut self.head, NONE);
        let fresh = std::mem::take(&mut self.spare);
        (std::mem::replace(&mut self.elems, fresh), head)
    }

    /// Hand back the elements [`Self::clear`] returned, for reuse.
    fn recycle(&mut self, mut elems: Vec<Elem>) {
        elems.clear();
        self.spare = elems;
    }

    /// `Insert` (find-or-insert): the element of `key`, and whether it is new.
    fn insert(&mut self, key: u32, tok: u32) -> (u32, bool) {
        let index = self.hash_mod.of(key, self.hash_size);
        let bk = self.buckets[index];
        if bk.last != NONE {
            let mut e = if bk.prev_bucket == NONE {
                self.head
            } else {
                self.elems[self.buckets[bk.prev_bucket as usize].last as usize].tail
            };
            let end = self.elems[bk.last as usize].tail;
            while e != end {
                if self.elems[e as usize].key == key {
                    return (e, false);
                }
                e = self.elems[e as usize].tail;
            }
        }
        let id = self.elems.len() as u32;
        if bk.last == NONE {
            if self.bucket_tail == NONE {
                self.head = id;
            } else {
                let t = self.buckets[self.bucket_tail as usize].last;
                self.elems[t as usize].tail = id;
            }
            self.elems.push(Elem {
                key,
                tok,
                tail: NONE,
            });
            self.buckets[index] = Bucket {
                last: id,
                prev_bucket: self.bucket_tail,
            };
            self.bucket_tail = index as u32;
        } else {
            let tail = self.elems[bk.last as usize].tail;
            self.elems.push(Elem { key, tok, tail });
            self.elems[bk.last as usize].tail = id;
            self.buckets[index].last = id;
        }
        (id, true)
    }
}

/// One utterance's decoder (Kaldi creates one per utterance and reuses it
/// for the retry, so the hash size carries over).
pub struct FasterDecoder<'g> {
    graph: &'g DecodingGraph,
    opts: DecoderOptions,
    toks: TokenList,
    tokens: Vec<Token>,
    queue: Vec<u32>,
    tmp: Vec<f64>,
}

impl<'g> FasterDecoder<'g> {
    pub fn new(graph: &'g DecodingGraph, opts: DecoderOptions) -> Self {
        FasterDecoder {
            graph,
            opts,
            toks: TokenList::new(),
            tokens: Vec::new(),
            queue: Vec::new(),
            tmp: Vec::new(),
        }
    }

    pub fn set_options(&mut self, opts: DecoderOptions) {
        self.opts = opts;
    }

    fn new_token(&mut self, cost: f64, ilabel: i32, graph_cost: f32, prev: u32) -> u32 {
        self.tokens.push(Token {
            cost,
            ilabel,
            graph_cost,
            prev,
        });
        (self.tokens.len() - 1) as u32
    }

    /// `Decode`: every frame of `ac`.
    pub fn decode<A: AcousticCosts + ?Sized>(&mut self, ac: &mut A) {
        let elems = self.toks.clear().0;
        self.toks.recycle(elems);
        self.tokens.clear();
        self.tokens.reserve(ac.num_frames() * 8);
        let start = self.graph.start;
        let t = self.new_token(0.0, 0, 0.0, NONE);
        self.toks.insert(start, t);
        self.process_nonemitting(f32::MAX as f64);
        for frame in 0..ac.num_frames() {
            let cutoff = self.process_emitting(ac, frame);
            self.process_nonemitting(cutoff);
        }
    }

    /// `GetCutoff`: the pruning threshold of the previous frame's tokens,
    /// the adaptive beam and the first best element.
    fn get_cutoff(&mut self, elems: &[Elem], head: u32) -> (f64, f32, u32, usize) {
        let mut best = f64::INFINITY;
        let mut best_elem = NONE;
        let mut count = 0usize;
        let o = self.opts;
        let plain = o.max_active == i32::MAX && o.min_active == 0;
        self.tmp.clear();
        let mut e = head;
        while e != NONE {
            let w = self.tokens[elems[e as usize].tok as usize].cost;
            if !plain {
                self.tmp.push(w);
            }
            if w < best {
                best = w;
                best_elem = e;
            }
            count += 1;
            e = elems[e as usize].tail;
        }
        if plain {
            return (best + o.beam as f64, o.beam, best_elem, count);
        }
        let beam_cutoff = best + o.beam as f64;
        let mut max_active_cutoff = f64::INFINITY;
        let mut min_active_cutoff = f64::INFINITY;
        let n = self.tmp.len();
        if n > o.max_active as usize {
            let k = o.max_active as usize;
            self.tmp.select_nth_unstable_by(k, f64::total_cmp);
            max_active_cutoff = self.tmp[k];
        }
        if max_active_cutoff < beam_cutoff {
            let ab = (max_active_cutoff - best + o.beam_delta as f64) as f32;
            return (max_active_cutoff, ab, best_elem, count);
        }
        if n > o.min_active as usize {
            if o.min_active == 0 {
                min_active_cutoff = best;
            } else {
                let k = o.min_active as usize;
                let upto = if n > o.max_active as usize {
                    o.max_active as usize
                } else {
                    n
                };
                // The k-th smallest cost exceeds the beam cutoff only when
                // at most k costs are within it: only then is it needed.
                let within = self.tmp[..upto]
                    .iter()
                    .filter(|&&w| w <= beam_cutoff)
                    .count();
                min_active_cutoff = if within > k {
                    beam_cutoff
                } else {
                    self.tmp[..upto].select_nth_unstable_by(k, f64::total_cmp);
                    self.tmp[k]
                };
            }
        }
        if min_active_cutoff > beam_cutoff {
            let ab = (min_active_cutoff - best + o.beam_delta as f64) as f32;
            (min_active_cutoff, ab, best_elem, count)
        } else {
            (beam_cutoff, o.beam, best_elem, count)
        }
    }

    fn process_emitting<A: AcousticCosts + ?Sized>(&mut self, ac: &mut A, frame: usize) -> f64 {
        let (last, head) = self.toks.clear();
        let next_cutoff = self.expand_emitting(ac, frame, &last, head);
        self.toks.recycle(last);
        next_cutoff
    }

    /// `ProcessEmitting` over the previous frame's elements `last`.
    fn expand_emitting<A: AcousticCosts + ?Sized>(
        &mut self,
        ac: &mut A,
        frame: usize,
        last: &[Elem],
        head: u32,
    ) -> f64 {
        let (weight_cutoff, adaptive_beam, best_elem, tok_cnt) = self.get_cutoff(last, head);
        // PossiblyResizeHash.
        let new_sz = (tok_cnt as f32 * self.opts.hash_ratio) as usize;
        if new_sz > self.toks.hash_size {
            self.toks.set_size(new_sz);
        }
        let graph = self.graph;
        let ab = adaptive_beam as f64;
        let mut next_cutoff = f64::INFINITY;
        if best_elem != NONE {
            let el = last[best_elem as usize];
            let cost = self.tokens[el.tok as usize].cost;
            for arc in graph.emitting_arcs(el.key) {
                let ac_cost = ac.cost(frame, arc.column);
                let w = arc.weight as f64 + cost + ac_cost as f64;
                if w + ab < next_cutoff {
                    next_cutoff = w + ab;
                }
            }
        }
        let mut e = head;
        while e != NONE {
            let el = last[e as usize];
            let tok_cost = self.tokens[el.tok as usize].cost;
            if tok_cost < weight_cutoff {
                for arc in graph.emitting_arcs(el.key) {
                    let ac_cost = ac.cost(frame, arc.column);
                    let w = arc.weight as f64 + tok_cost + ac_cost as f64;
                    if w < next_cutoff {
                        let cost = tok_cost + arc.weight as f64 + ac_cost as f64;
                        let nt = self.new_token(cost, arc.ilabel, arc.weight, el.tok);
                        let (found, fresh) = self.toks.insert(arc.next, nt);
                        if w + ab < next_cutoff {
                            next_cutoff = w + ab;
                        }
                        if !fresh {
                            let slot = &mut self.toks.elems[found as usize].tok;
                            if self.tokens[*slot as usize].cost > cost {
                                *slot = nt;
                            }
                        }
                    }
                }
            }
            e = el.tail;
        }
        next_cutoff
    }

    /// `ProcessNonemitting`. Kaldi queues every element; one whose state
    /// has no ε-arcs does nothing when popped, so only the others are
    /// queued (the rest pop in Kaldi's order).
    fn process_nonemitting(&mut self, cutoff: f64) {
        let graph = self.graph;
        self.queue.clear();
        let mut e = self.toks.head;
        while e != NONE {
            let el = self.toks.elems[e as usize];
            if graph.has_epsilons(el.key) {
                self.queue.push(e);
            }
            e = el.tail;
        }
        while let Some(e) = self.queue.pop() {
            let el = self.toks.elems[e as usize];
            let tok_cost = self.tokens[el.tok as usize].cost;
            if tok_cost > cutoff {
                continue;
            }
            for arc in graph.epsilon_arcs(el.key) {
                let cost = tok_cost + arc.weight as f64;
                if cost > cutoff {
                    continue;
                }
                let nt = self.new_token(cost, 0, arc.weight, el.tok);
                let (found, fresh) = self.toks.insert(arc.next, nt);
                let queue = graph.has_epsilons(arc.next);
                if fresh {
                    if queue {
                        self.queue.push(found);
                    }
                } else {
                    let slot = &mut self.toks.elems[found as usize].tok;
                    if self.tokens[*slot as usize].cost > cost {
                        *slot = nt;
                        if queue {
                            self.queue.push(found);
                        }
                    }
                }
            }
        }
    }

    /// `ReachedFinal`: a token with finite cost on a final state.
    pub fn reached_final(&self) -> bool {
        let mut e = self.toks.head;
        while e != NONE {
            let el = self.toks.elems[e as usize];
            if self.tokens[el.tok as usize].cost != f64::INFINITY
                && self.graph.finals[el.key as usize] != f32::INFINITY
            {
                return true;
            }
            e = el.tail;
        }
        false
    }

    /// `GetBestPath` (final states only when one was reached): the path's
    /// input labels (ε dropped: the alignment), its graph and acoustic costs
    /// per arc as Kaldi's `LatticeWeight`s would hold them, and the final cost.
    pub fn best_path(&self) -> Option<BestPath> {
        let is_final = self.reached_final();
        let mut best = NONE;
        let mut best_key = 0u32;
        let mut best_cost = f64::INFINITY;
        let mut e = self.toks.head;
        while e != NONE {
            let el = self.toks.elems[e as usize];
            let c = self.tokens[el.tok as usize].cost;
            if is_final {
                let fc = c + self.graph.finals[el.key as usize] as f64;
                if fc < best_cost && fc != f64::INFINITY {
                    best_cost = fc;
                    best = el.tok;
                    best_key = el.key;
                }
            } else if best == NONE || self.tokens[best as usize].cost > c {
                best = el.tok;
                best_key = el.key;
            }
            e = el.tail;
        }
        if best == NONE {
            return None;
        }
        let mut arcs = Vec::new();
        let mut t = best;
        while t != NONE {
            let tok = self.tokens[t as usize];
            if tok.prev == NONE {
                break; // the start token carries no arc
            }
            let prev_cost = self.tokens[tok.prev as usize].cost;
            let tot = (tok.cost - prev_cost) as f32;
            arcs.push(PathArc {
                ilabel: tok.ilabel,
                graph: tok.graph_cost,
                acoustic: tot - tok.graph_cost,
            });
            t = tok.prev;
        }
        arcs.reverse();
        let final_cost = if is_final {
            self.graph.finals[best_key as usize]
        } else {
            0.0
        };
        Some(BestPath { arcs, final_cost })
    }
}

/// One arc of the best path.
#[derive(Debug, Clone, Copy)]
pub struct PathArc {
    pub ilabel: i32,
    pub graph: f32,
    pub acoustic: f32,
}

/// The best path of a decode.
#[derive(Debug, Clone)]
pub struct BestPath {
    pub arcs: Vec<PathArc>,
    pub final_cost: f32,
}

impl BestPath {
    /// The non-ε input labels: the alignment.
    pub fn alignment(&self) -> Vec<i32> {
        self.arcs
            .iter()
            .filter(|a| a.ilabel != 0)
            .map(|a| a.ilabel)
            .collect()
    }

    /// Total (graph, acoustic) cost as `GetLinearSymbolSequence` sums the
    /// lattice weights (float sums in path order, the final cost last).
    pub fn total_weight(&self) -> (f32, f32) {
        let (mut g, mut a) = (0f32, 0f32);
        for arc in &self.arcs {
            g += arc.graph;
            a += arc.acoustic;
        }
        (g + self.final_cost, a)
    }

    /// `GetPerFrameAcousticCosts`: each emitting arc's acoustic cost, with the
    /// costs of ε-arcs added to the frame before them (or, before the first
    /// frame, to the first).
    pub fn per_frame_acoustic_costs(&self) -> Vec<f32> {
        let mut out: Vec<f32> = Vec::new();
        let mut eps = 0f32;
        for arc in &self.arcs {
            if arc.ilabel != 0 {
                let mut c = arc.acoustic;
                if eps > 0.0 {
                    c += eps;
                    eps = 0.0;
                }
                out.push(c);
            } else if !arc.acoustic.is_nan() {
                match out.last_mut() {
                    Some(l) => *l += arc.acoustic,
                    None => eps += arc.acoustic,
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::FastMod;

    #[test]
    fn fast_remainders_are_remainders() {
        let mut x = 0x9E37_79B9u32;
        for d in (1..3000).chain([65_535, 65_536, 1 << 31, u32::MAX as usize]) {
            let f = FastMod::new(d);
            for a in [0, 1, d as u32 - 1, d as u32, u32::MAX, u32::MAX - 1] {
                assert_eq!(f.of(a, d), a as usize % d, "{a} % {d}");
            }
            for _ in 0..50 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                assert_eq!(f.of(x, d), x as usize % d, "{x} % {d}");
            }
        }
        let big = u32::MAX as usize + 7;
        assert_eq!(FastMod::new(big).of(12, big), 12);
    }
}

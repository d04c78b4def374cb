//! Kaldi lattices (`lat/kaldi-lattice.h`): [`Lattice`] (arcs labelled
//! transition-id : word with a [`LatticeWeight`]) and [`CompactLattice`]
//! (acceptor arcs labelled with words, weights carrying the transition-id
//! strings), read and written as Kaldi's `LatticeHolder` and
//! `CompactLatticeHolder` do.
//!
//! - Binary: an OpenFst `VectorFst` without Kaldi's `\0B` marker: header
//!   (magic `0x7eb2fdd6`, fst type `vector`, arc type `lattice4` /
//!   `compactlattice44`, version 2, flags, properties, start, number of states,
//!   number of arcs — always written as 0), then per state its final weight,
//!   its arc count (int64) and its arcs (ilabel, olabel, weight, nextstate).
//!   The `lattice8`/`compactlattice84` double forms are read (and converted).
//! - Text: a newline, the OpenFst printer's lines (`src\tdst\tilabel[\tolabel]
//!   [\tweight]`, finals `state[\tweight]`, the start state first), then an
//!   empty line. Costs are printed with 6 significant digits, so text is
//!   stable under re-writing but not exact.
//!
//! The stored properties word is kept on read and written back, and updated
//! by OpenFst's rules ([`props`]) when an FST is built or changed, so binary
//! output is what Kaldi writes byte for byte.
//!
//! Reading a `Lattice` where a `CompactLattice` is expected converts it
//! (Kaldi's `ConvertLattice`: `Factor`, then `TopSort`), and the other way
//! round. Not here: OpenFst algorithms beyond the ones Kaldi's copy and
//! rescoring tools need (those conversions, topological sorting).

mod factor;
pub mod props;
pub(crate) mod text;
pub mod weight;

use std::io::{self, Write};

use super::holder::Holder;
use super::io::{is_space, Reader};
use crate::error::{Error, Pos, Result};
pub use weight::{CompactLatticeWeight, FstWeight, LatticeWeight, TropicalWeight};

/// OpenFst's FST magic number (`kFstMagicNumber`).
pub const FST_MAGIC: u32 = 2_125_659_606;
/// `VectorFst` file version.
const FILE_VERSION: i32 = 2;

/// One arc.
#[derive(Debug, Clone, PartialEq)]
pub struct Arc<W> {
    pub ilabel: i32,
    pub olabel: i32,
    pub weight: W,
    pub nextstate: i32,
}

/// One state: its final weight (zero if not final) and its arcs.
#[derive(Debug, Clone, PartialEq)]
pub struct FstState<W> {
    pub final_weight: W,
    pub arcs: Vec<Arc<W>>,
}

/// An OpenFst `VectorFst` with weights `W`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fst<W> {
    /// Start state, -1 when none (an empty FST).
    pub start: i32,
    pub states: Vec<FstState<W>>,
    /// The stored OpenFst properties word.
    pub properties: u64,
}

/// Kaldi `Lattice`: ilabel = transition-id, olabel = word.
pub type Lattice = Fst<LatticeWeight>;
/// Kaldi `CompactLattice`: label = word, weight string = transition-ids.
pub type CompactLattice = Fst<CompactLatticeWeight>;

fn info<W: FstWeight>(a: &Arc<W>) -> props::ArcInfo {
    props::ArcInfo {
        ilabel: a.ilabel,
        olabel: a.olabel,
        nextstate: a.nextstate,
        weighted: a.weight.is_weighted(),
    }
}

impl<W: FstWeight> Default for Fst<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W: FstWeight> Fst<W> {
    /// An empty FST (as `new VectorFst`).
    pub fn new() -> Self {
        Fst {
            start: -1,
            states: Vec::new(),
            properties: props::new_fst(),
        }
    }

    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    pub fn num_arcs(&self) -> usize {
        self.states.iter().map(|s| s.arcs.len()).sum()
    }

    /// `AddState`; returns the new state's id.
    pub fn add_state(&mut self) -> i32 {
        self.states.push(FstState {
            final_weight: W::zero(),
            arcs: Vec::new(),
        });
        self.properties = props::add_state(self.properties);
        (self.states.len() - 1) as i32
    }

    /// `SetStart`.
    pub fn set_start(&mut self, s: i32) {
        self.start = s;
        self.properties = props::set_start(self.properties);
    }

    /// `SetFinal` (state must exist).
    pub fn set_final(&mut self, s: i32, w: W) {
        let st = &mut self.states[s as usize];
        self.properties = props::set_final(
            self.properties,
            st.final_weight.is_weighted(),
            w.is_weighted(),
        );
        st.final_weight = w;
    }

    /// `AddArc` (state must exist).
    pub fn add_arc(&mut self, s: i32, arc: Arc<W>) {
        let st = &mut self.states[s as usize];
        let prev = st.arcs.last().map(info);
        self.properties = props::add_arc(self.properties, s, info(&arc), prev);
        st.arcs.push(arc);
    }

    /// `MutableArcIterator::SetValue` on arc `i` of state `s`.
    pub fn set_arc(&mut self, s: usize, i: usize, arc: Arc<W>) {
        let old = info(&self.states[s].arcs[i]);
        self.properties = props::set_arc(self.properties, old, info(&arc));
        self.states[s].arcs[i] = arc;
    }

    /// [`set_arc`](Self::set_arc) of arc `i` of state `s` changed in place
    /// by `f` (no copy of the arc and its label strings).
    pub fn update_arc(&mut self, s: usize, i: usize, f: impl FnOnce(&mut Arc<W>)) {
        let arc = &mut self.states[s].arcs[i];
        let old = info(arc);
        f(arc);
        self.properties = props::set_arc(self.properties, old, info(arc));
    }

    /// [`set_final`](Self::set_final) of state `s` with its final weight
    /// changed in place by `f`.
    pub fn update_final(&mut self, s: usize, f: impl FnOnce(&mut W)) {
        let st = &mut self.states[s];
        let was = st.final_weight.is_weighted();
        f(&mut st.final_weight);
        self.properties = props::set_final(self.properties, was, st.final_weight.is_weighted());
    }

    /// Every arc goes to a higher-numbered state (OpenFst's `kTopSorted`).
    pub fn is_top_sorted(&self) -> bool {
        self.states
            .iter()
            .enumerate()
            .all(|(s, st)| st.arcs.iter().all(|a| a.nextstate as usize > s))
    }

    /// OpenFst `TopSort`: renumber the states in the order of a depth-first
    /// search's reversed finishing times (start state first, arcs in order).
    /// Returns false (FST unchanged) when it has a cycle.
    pub fn top_sort(&mut self) -> bool {
        let n = self.states.len();
        if self.start < 0 || n == 0 {
            return true;
        }
        let (_, finish, acyclic) = dfs(self, true);
        if !acyclic {
            return false;
        }
        let mut order = vec![0usize; n];
        for (i, &s) in finish.iter().rev().enumerate() {
            order[s] = i;
        }
        let mut states: Vec<Option<FstState<W>>> = std::mem::take(&mut self.states)
            .into_iter()
            .map(Some)
            .collect();
        let mut out: Vec<Option<FstState<W>>> = (0..n).map(|_| None).collect();
        for (s, slot) in states.iter_mut().enumerate() {
            let mut st = slot.take().unwrap_or(FstState {
                final_weight: W::zero(),
                arcs: Vec::new(),
            });
            for a in &mut st.arcs {
                a.nextstate = order[a.nextstate as usize] as i32;
            }
            out[order[s]] = Some(st);
        }
        self.states = out.into_iter().flatten().collect();
        self.start = order[self.start as usize] as i32;
        // StateSort keeps what does not depend on numbering; TopSort then
        // knows the order.
        self.properties &= props::STATE_SORT & !(props::CYCLIC | props::INITIAL_CYCLIC);
        self.properties |= props::TOP_SORTED | props::ACYCLIC | props::INITIAL_ACYCLIC;
        true
    }

    /// OpenFst `Properties(kTopSorted, true)`: the stored answer when known,
    /// else computed (with the other properties the same pass finds, which
    /// are then stored too, as OpenFst does).
    pub fn test_top_sorted(&mut self) -> bool {
        let p = self.properties;
        if p & (props::TOP_SORTED | props::NOT_TOP_SORTED) != 0 {
            return p & props::TOP_SORTED != 0;
        }
        let computed = props::compute_arc_properties(
            self.start,
            self.states.iter().map(|st| {
                (
                    st.final_weight != W::zero(),
                    st.final_weight.is_weighted(),
                    st.arcs.iter().map(info).collect::<Vec<_>>(),
                )
            }),
        );
        self.properties = props::merge_known(p, computed);
        computed & props::TOP_SORTED != 0
    }

    /// Binary form (`VectorFst::Write` with default options).
    pub fn write_binary(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&FST_MAGIC.to_le_bytes());
        for s in ["vector", W::ARC_TYPE] {
            out.extend_from_slice(&(s.len() as i32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out.extend_from_slice(&FILE_VERSION.to_le_bytes());
        out.extend_from_slice(&0i32.to_le_bytes()); // flags: no symbol tables
        out.extend_from_slice(&props::for_write(self.properties).to_le_bytes());
        out.extend_from_slice(&(self.start as i64).to_le_bytes());
        out.extend_from_slice(&(self.states.len() as i64).to_le_bytes());
        // OpenFst writes the header before counting arcs and does not go back.
        out.extend_from_slice(&0i64.to_le_bytes());
        for st in &self.states {
            st.final_weight.write_binary(out);
            out.extend_from_slice(&(st.arcs.len() as i64).to_le_bytes());
            for a in &st.arcs {
                out.extend_from_slice(&a.ilabel.to_le_bytes());
                out.extend_from_slice(&a.olabel.to_le_bytes());
                a.weight.write_binary(out);
                out.extend_from_slice(&a.nextstate.to_le_bytes());
            }
        }
    }

    /// Text form as Kaldi's holders write it (leading newline, OpenFst
    /// printer lines, terminating empty line).
    pub fn write_text(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push('\n');
        // CompactLattice is printed as an acceptor (when it is one).
        let acceptor = W::ARC_TYPE.starts_with("compact")
            && self
                .states
                .iter()
                .all(|s| s.arcs.iter().all(|a| a.ilabel == a.olabel));
        if self.start >= 0 {
            let start = self.start as usize;
            let order =
                std::iter::once(start).chain((0..self.states.len()).filter(|&s| s != start));
            for s in order {
                let st = &self.states[s];
                for a in &st.arcs {
                    let _ = write!(out, "{s}\t{}\t{}", a.nextstate, a.ilabel);
                    if !acceptor {
                        let _ = write!(out, "\t{}", a.olabel);
                    }
                    if a.weight != W::one() {
                        out.push('\t');
                        a.weight.fmt_text(out);
                    }
                    out.push('\n');
                }
                if st.final_weight != W::zero() || st.arcs.is_empty() {
                    let _ = write!(out, "{s}");
                    if st.final_weight != W::one() {
                        out.push('\t');
                        st.final_weight.fmt_text(out);
                    }
                    out.push('\n');
                }
            }
        }
        out.push('\n');
    }

    /// Read the binary form at the reader's position (at the magic number).
    /// `Ok(Err(header))` when the FST has another arc type (for the caller
    /// to convert or refuse); the reader is then just after the header.
    pub fn read_binary(r: &mut Reader<'_>) -> Result<std::result::Result<Self, FstHeader>> {
        let hdr = FstHeader::read(r)?;
        let double = if hdr.arc_type == W::ARC_TYPE {
            false
        } else if hdr.arc_type == W::ARC_TYPE_DOUBLE {
            true
        } else {
            return Ok(Err(hdr));
        };
        Ok(Ok(read_states::<W>(r, &hdr, double)?))
    }
}

/// OpenFst `DfsVisit` over every state (start state first, then the
/// unvisited ones in order, arcs in order): the states in discovery order, in
/// finishing order, and whether no back arc (cycle) was seen. With
/// `stop_at_cycle` the search ends at the first back arc (`TopOrderVisitor`).
fn dfs<W>(f: &Fst<W>, stop_at_cycle: bool) -> (Vec<usize>, Vec<usize>, bool) {
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let n = f.states.len();
    let (mut discovered, mut finish) = (Vec::with_capacity(n), Vec::with_capacity(n));
    if f.start < 0 || n == 0 {
        return (discovered, finish, true);
    }
    let mut acyclic = true;
    let mut color = vec![WHITE; n];
    let mut root = f.start as usize;
    loop {
        color[root] = GREY;
        discovered.push(root);
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (s, ref mut next)) = stack.last_mut() {
            if *next >= f.states[s].arcs.len() {
                color[s] = BLACK;
                finish.push(s);
                stack.pop();
                continue;
            }
            let d = f.states[s].arcs[*next].nextstate as usize;
            *next += 1;
            match color[d] {
                WHITE => {
                    color[d] = GREY;
                    discovered.push(d);
                    stack.push((d, 0));
                }
                GREY => {
                    acyclic = false;
                    if stop_at_cycle {
                        return (discovered, finish, false);
                    }
                }
                _ => {}
            }
        }
        let from = if root == f.start as usize {
            0
        } else {
            root + 1
        };
        match (from..n).find(|&r| color[r] == WHITE) {
            Some(r) => root = r,
            None => break,
        }
    }
    (discovered, finish, acyclic)
}

/// The fields of OpenFst's `FstHeader` Kaldi lattices use.
#[derive(Debug, Clone)]
pub struct FstHeader {
    pub fst_type: String,
    pub arc_type: String,
    pub version: i32,
    pub flags: i32,
    pub properties: u64,
    pub start: i64,
    pub num_states: i64,
    pub num_arcs: i64,
    /// Byte position just after the header.
    pub end: usize,
}

fn read_u32(r: &mut Reader<'_>) -> Result<u32> {
    let b = r.read_bytes(4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_i64(r: &mut Reader<'_>) -> Result<i64> {
    let b = r.read_bytes(8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(i64::from_le_bytes(a))
}

fn read_fst_string(r: &mut Reader<'_>, what: &str) -> Result<String> {
    let at = r.pos();
    let n = read_u32(r)? as i32;
    if !(0..=256).contains(&n) {
        return Err(r.error_at(
            at,
            format!("bad FST header: {what} has length {n} (corrupt data?)"),
        ));
    }
    let b = r.read_bytes(n as usize)?;
    String::from_utf8(b.to_vec())
        .map_err(|_| r.error_at(at, format!("bad FST header: {what} is not text")))
}

impl FstHeader {
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let at = r.pos();
        let magic = read_u32(r)?;
        if magic != FST_MAGIC {
            return Err(r.error_at(
                at,
                format!(
                    "not an OpenFst FST: magic number 0x{magic:08x}, expected 0x{FST_MAGIC:08x}"
                ),
            ));
        }
        let fst_type = read_fst_string(r, "fst type")?;
        let arc_type = read_fst_string(r, "arc type")?;
        let version = read_u32(r)? as i32;
        let flags = read_u32(r)? as i32;
        let properties = read_i64(r)? as u64;
        let start = read_i64(r)?;
        let num_states = read_i64(r)?;
        let num_arcs = read_i64(r)?;
        if fst_type != "vector" {
            return Err(r.error_at(
                at,
                format!("unsupported FST type '{fst_type}' (Kaldi lattices are 'vector' FSTs)"),
            ));
        }
        if version < FILE_VERSION {
            return Err(r.error_at(
                at,
                format!("unsupported vector FST file version {version} (expected 2)"),
            ));
        }
        if flags != 0 {
            return Err(Error::Unsupported {
                path: String::new(),
                pos: Pos::Byte(at as u64),
                msg: format!(
                    "FST header flags {flags}: symbol tables or aligned FSTs are not supported in lattices"
                ),
            });
        }
        Ok(FstHeader {
            fst_type,
            arc_type,
            version,
            flags,
            properties,
            start,
            num_states,
            num_arcs,
            end: r.pos(),
        })
    }
}

pub(crate) fn read_states<W: FstWeight>(
    r: &mut Reader<'_>,
    hdr: &FstHeader,
    double: bool,
) -> Result<Fst<W>> {
    let ns = hdr.num_states;
    // Each state takes at least its final weight and an arc count.
    let state_bytes = (W::MIN_BYTES + 8) as u128;
    if ns < 0 || (ns as u128) * state_bytes > r.remaining().len() as u128 {
        return Err(r.error_at(
            hdr.end - 16,
            format!(
                "bad FST header: {ns} states with {} bytes left (truncated FST?)",
                r.remaining().len()
            ),
        ));
    }
    if hdr.start < -1 || hdr.start >= ns {
        return Err(r.error_at(
            hdr.end - 24,
            format!("bad FST header: start state {} of {ns} states", hdr.start),
        ));
    }
    let mut states = Vec::with_capacity(ns as usize);
    for s in 0..ns {
        let final_weight = W::read_binary(r, double)?;
        let at = r.pos();
        let narcs = read_i64(r)?;
        // An arc takes at least its labels, weight and next state.
        if narcs < 0 || (narcs as u128) * (W::MIN_BYTES + 12) as u128 > r.remaining().len() as u128
        {
            return Err(r.error_at(
                at,
                format!(
                    "state {s}: {narcs} arcs with {} bytes left (truncated FST?)",
                    r.remaining().len()
                ),
            ));
        }
        let mut arcs = Vec::with_capacity(narcs as usize);
        for _ in 0..narcs {
            let arc_at = r.pos();
            let ilabel = read_u32(r)? as i32;
            let olabel = read_u32(r)? as i32;
            let weight = W::read_binary(r, double)?;
            let nextstate = read_u32(r)? as i32;
            if nextstate < 0 || nextstate as i64 >= ns {
                return Err(r.error_at(
                    arc_at,
                    format!("bad arc from state {s}: next state {nextstate} of {ns} states"),
                ));
            }
            arcs.push(Arc {
                ilabel,
                olabel,
                weight,
                nextstate,
            });
        }
        states.push(FstState { final_weight, arcs });
    }
    Ok(Fst {
        start: hdr.start as i32,
        states,
        properties: hdr.properties,
    })
}

impl CompactLattice {
    /// Kaldi `ConvertLattice(CompactLattice → Lattice)`: each transition-id
    /// string becomes a chain of arcs (the word on the first), final strings a
    /// chain to a new final state; state numbers of the compact lattice are kept.
    pub fn to_lattice(&self) -> Lattice {
        let mut out = Lattice::new();
        for _ in 0..self.states.len() {
            out.add_state();
        }
        out.set_start(self.start);
        let one = LatticeWeight::one();
        for (s, st) in self.states.iter().enumerate() {
            let s = s as i32;
            let fw = &st.final_weight;
            if *fw != CompactLatticeWeight::zero() {
                let mut cur = s;
                for (n, &tid) in fw.string.iter().enumerate() {
                    let next = out.add_state();
                    let w = if n == 0 { fw.weight } else { one };
                    // (0, tid) inverted: ilabel = tid, olabel = 0.
                    out.add_arc(
                        cur,
                        Arc {
                            ilabel: tid,
                            olabel: 0,
                            weight: w,
                            nextstate: next,
                        },
                    );
                    cur = next;
                }
                out.set_final(cur, if fw.string.is_empty() { fw.weight } else { one });
            }
            for a in &st.arcs {
                let len = a.weight.string.len();
                let mut cur = s;
                for n in 0..len.saturating_sub(1) {
                    let next = out.add_state();
                    out.add_arc(
                        cur,
                        Arc {
                            ilabel: a.weight.string[n],
                            olabel: if n == 0 { a.ilabel } else { 0 },
                            weight: if n == 0 { a.weight.weight } else { one },
                            nextstate: next,
                        },
                    );
                    cur = next;
                }
                out.add_arc(
                    cur,
                    Arc {
                        ilabel: if len > 0 { a.weight.string[len - 1] } else { 0 },
                        olabel: if len <= 1 { a.ilabel } else { 0 },
                        weight: if len <= 1 { a.weight.weight } else { one },
                        nextstate: a.nextstate,
                    },
                );
            }
        }
        out
    }
}

/// Kaldi's holders: text when the object starts with whitespace, else the
/// FST magic number.
pub(crate) enum Form {
    Text,
    Binary,
}

pub(crate) fn holder_form(r: &mut Reader<'_>, what: &str) -> Result<Form> {
    match r.peek_byte() {
        None => Err(r.error(format!("end of data reading {what}"))),
        Some(c) if is_space(c) => {
            // Spaces (e.g. `\r`) up to the newline that ends the key's line.
            while let Some(c) = r.peek_byte() {
                if is_space(c) && c != b'\n' {
                    r.set_pos(r.pos() + 1);
                } else {
                    break;
                }
            }
            if r.peek_byte() == Some(b'\n') {
                r.set_pos(r.pos() + 1);
                Ok(Form::Text)
            } else {
                Err(r.error(format!(
                    "reading {what}: spaces but no newline before the text form"
                )))
            }
        }
        Some(214) => Ok(Form::Binary),
        Some(c) => Err(r.error(format!(
            "reading {what}: does not appear to be an FST (byte 0x{c:02x}, no magic number)"
        ))),
    }
}

impl Holder for Lattice {
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        match holder_form(r, "lattice")? {
            Form::Text => {
                let t = text::read_text(r)?;
                match (t.lattice, t.compact) {
                    (Some(l), _) => Ok(l),
                    (None, Some(c)) => Ok(c.to_lattice()),
                    (None, None) => Err(r.error("empty lattice text")),
                }
            }
            Form::Binary => {
                let at = r.pos();
                match Lattice::read_binary(r)? {
                    Ok(l) => Ok(l),
                    Err(h)
                        if h.arc_type == CompactLatticeWeight::ARC_TYPE
                            || h.arc_type == CompactLatticeWeight::ARC_TYPE_DOUBLE =>
                    {
                        let double = h.arc_type == CompactLatticeWeight::ARC_TYPE_DOUBLE;
                        Ok(read_states::<CompactLatticeWeight>(r, &h, double)?.to_lattice())
                    }
                    Err(h) => Err(r.error_at(
                        at,
                        format!("FST with arc type '{}' cannot be read as a Lattice (expected lattice4 or compactlattice44)", h.arc_type),
                    )),
                }
            }
        }
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, binary: bool) -> io::Result<()> {
        write_fst(self, w, binary)
    }
}

impl Holder for CompactLattice {
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        match holder_form(r, "compact lattice")? {
            Form::Text => {
                let at = r.pos();
                let t = text::read_text(r)?;
                match (t.compact, t.lattice) {
                    (Some(c), _) => Ok(c),
                    (None, Some(l)) => Ok(l.to_compact()),
                    (None, None) => Err(r.error_at(at, "empty lattice text")),
                }
            }
            Form::Binary => {
                let at = r.pos();
                match CompactLattice::read_binary(r)? {
                    Ok(c) => Ok(c),
                    Err(h)
                        if h.arc_type == LatticeWeight::ARC_TYPE
                            || h.arc_type == LatticeWeight::ARC_TYPE_DOUBLE =>
                    {
                        let double = h.arc_type == LatticeWeight::ARC_TYPE_DOUBLE;
                        Ok(read_states::<LatticeWeight>(r, &h, double)?.to_compact())
                    }
                    Err(h) => Err(r.error_at(
                        at,
                        format!(
                            "FST with arc type '{}' cannot be read as a CompactLattice (expected compactlattice44)",
                            h.arc_type
                        ),
                    )),
                }
            }
        }
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, binary: bool) -> io::Result<()> {
        write_fst(self, w, binary)
    }
}

pub(crate) fn write_fst<W: FstWeight, O: Write + ?Sized>(
    f: &Fst<W>,
    w: &mut O,
    binary: bool,
) -> io::Result<()> {
    if binary {
        let mut buf = Vec::with_capacity(64 + f.num_arcs() * 32);
        f.write_binary(&mut buf);
        w.write_all(&buf)
    } else {
        let mut s = String::with_capacity(64 + f.num_arcs() * 64);
        f.write_text(&mut s);
        w.write_all(s.as_bytes())
    }
}

/// Which lattice type a table entry holds (binary: its arc type; text: the
/// shape of its lines), or `None` when it is not a lattice.
pub fn detect_lattice(buf: &[u8]) -> Option<LatticeKind> {
    if buf.len() >= 4 && u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) == FST_MAGIC {
        let mut r = Reader::new(buf, true);
        let h = FstHeader::read(&mut r).ok()?;
        return match h.arc_type.as_str() {
            "compactlattice44" | "compactlattice84" => Some(LatticeKind::Compact),
            "lattice4" | "lattice8" => Some(LatticeKind::Lattice),
            _ => None,
        };
    }
    text::detect_text(buf)
}

/// The two lattice types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatticeKind {
    Lattice,
    Compact,
}

#[cfg(test)]
mod tests;

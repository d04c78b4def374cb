//! Host memory for a batch of frames that a caller fills utterance by
//! utterance and hands to
//! [`LoadedModel::accumulate_frames`](crate::engine::LoadedModel::accumulate_frames).
//! An engine may lend its own memory for it
//! ([`LoadedModel::host_frames`](crate::engine::LoadedModel::host_frames)): the CUDA engine lends page-locked memory,
//! so the caller's copy of each frame is the only copy on the host and the
//! device reads the batch from there. Otherwise it is a plain vector.

use std::any::Any;

use rayon::prelude::*;

/// Memory an engine lends for a batch (for example page-locked memory that
/// a GPU copies from directly). Its whole length is room for frames.
pub trait LentMemory: Send + 'static {
    fn as_slice(&self) -> &[f32];
    fn as_mut_slice(&mut self) -> &mut [f32];
    /// For the engine that lent it, to get its own type back.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// Frames a caller keeps (an utterance it owns, or a part of a mapped
/// archive) until they are copied into a batch with
/// [`HostFrames::push_parts`].
pub trait FrameSource: Sync {
    /// Floats it holds.
    fn floats(&self) -> usize;
    /// Write them to `dst` (`floats()` long).
    fn copy_to(&self, dst: &mut [f32]);
}

impl FrameSource for Vec<f32> {
    fn floats(&self) -> usize {
        self.len()
    }
    fn copy_to(&self, dst: &mut [f32]) {
        dst.copy_from_slice(self);
    }
}

enum Mem {
    Plain(Vec<f32>),
    Lent(Box<dyn LentMemory>),
}

/// A batch of frames in host memory: `len()` floats written, room for
/// `capacity()`.
pub struct HostFrames {
    mem: Mem,
    len: usize,
}

impl Default for HostFrames {
    /// No room yet (a caller asks its engine for a buffer before the first
    /// batch).
    fn default() -> Self {
        HostFrames {
            mem: Mem::Plain(Vec::new()),
            len: 0,
        }
    }
}

impl HostFrames {
    /// A plain vector with room for `floats`.
    pub fn with_capacity(floats: usize) -> Self {
        HostFrames {
            mem: Mem::Plain(Vec::with_capacity(floats)),
            len: 0,
        }
    }

    /// Memory lent by an engine, empty.
    pub fn lent(mem: Box<dyn LentMemory>) -> Self {
        HostFrames {
            mem: Mem::Lent(mem),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Floats it holds without growing (a lent buffer never grows).
    pub fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Plain(v) => v.capacity(),
            Mem::Lent(m) => m.as_slice().len(),
        }
    }

    /// Whether `floats` more fit without growing.
    pub fn has_room(&self, floats: usize) -> bool {
        self.len + floats <= self.capacity()
    }

    /// Append `src`. A plain vector grows when it must; lent memory that has
    /// no room returns false and is left as it was.
    pub fn push(&mut self, src: &[f32]) -> bool {
        match &mut self.mem {
            Mem::Plain(v) => v.extend_from_slice(src),
            Mem::Lent(m) => {
                let Some(dst) = m.as_mut_slice().get_mut(self.len..self.len + src.len()) else {
                    return false;
                };
                dst.copy_from_slice(src);
            }
        }
        self.len += src.len();
        true
    }

    /// Append `parts` back to back; into lent memory the parts are copied in
    /// parallel (a batch of utterances queued by the caller). False, and
    /// nothing written, when lent memory has no room for them all.
    pub fn push_parts<P: FrameSource>(&mut self, parts: &[P]) -> bool {
        let total: usize = parts.iter().map(P::floats).sum();
        match &mut self.mem {
            Mem::Plain(v) => {
                for p in parts {
                    let n = v.len();
                    v.resize(n + p.floats(), 0.0);
                    p.copy_to(&mut v[n..]);
                }
            }
            Mem::Lent(m) => {
                let Some(mut rest) = m.as_mut_slice().get_mut(self.len..self.len + total) else {
                    return false;
                };
                let mut dst = Vec::with_capacity(parts.len());
                for p in parts {
                    let (head, tail) = rest.split_at_mut(p.floats());
                    dst.push(head);
                    rest = tail;
                }
                dst.into_par_iter()
                    .zip(parts.par_iter())
                    .for_each(|(d, p)| p.copy_to(d));
            }
        }
        self.len += total;
        true
    }

    /// The floats written.
    pub fn as_slice(&self) -> &[f32] {
        match &self.mem {
            Mem::Plain(v) => v,
            Mem::Lent(m) => &m.as_slice()[..self.len],
        }
    }

    /// Empty again, keeping the memory.
    pub fn clear(&mut self) {
        if let Mem::Plain(v) = &mut self.mem {
            v.clear();
        }
        self.len = 0;
    }

    /// Whether this is memory an engine lent.
    pub fn is_lent(&self) -> bool {
        matches!(self.mem, Mem::Lent(_))
    }

    /// For engines: the lent memory and the floats written, leaving `self`
    /// an empty plain buffer; `None` (and `self` untouched) for a plain one.
    pub fn take_lent(&mut self) -> Option<(Box<dyn LentMemory>, usize)> {
        if !self.is_lent() {
            return None;
        }
        let len = std::mem::take(&mut self.len);
        match std::mem::replace(&mut self.mem, Mem::Plain(Vec::new())) {
            Mem::Lent(m) => Some((m, len)),
            Mem::Plain(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<f32>);
    impl LentMemory for Fixed {
        fn as_slice(&self) -> &[f32] {
            &self.0
        }
        fn as_mut_slice(&mut self) -> &mut [f32] {
            &mut self.0
        }
        fn into_any(self: Box<Self>) -> Box<dyn Any> {
            self
        }
    }

    #[test]
    fn plain_grows_and_clears() {
        let mut f = HostFrames::with_capacity(4);
        assert!(f.has_room(4) && !f.has_room(5));
        assert!(f.push(&[1.0, 2.0, 3.0]));
        assert!(f.push(&[4.0, 5.0]));
        assert_eq!(f.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(f.take_lent().is_none());
        assert_eq!(f.len(), 5);
        f.clear();
        assert!(f.is_empty() && f.capacity() >= 5);
    }

    #[test]
    fn lent_memory_is_filled_in_place_and_never_grows() {
        let mut f = HostFrames::lent(Box::new(Fixed(vec![0.0; 4])));
        assert!(f.is_lent() && f.capacity() == 4);
        assert!(f.push(&[1.0, 2.0, 3.0]));
        assert!(!f.push(&[4.0, 5.0]), "no room: refused");
        assert_eq!(f.as_slice(), &[1.0, 2.0, 3.0]);
        let (m, len) = f.take_lent().expect("lent");
        assert_eq!(len, 3);
        assert!(!f.is_lent() && f.is_empty() && f.capacity() == 0);
        let back = m.into_any().downcast::<Fixed>().expect("own type");
        assert_eq!(back.0, vec![1.0, 2.0, 3.0, 0.0]);
    }

    #[test]
    fn parts_go_back_to_back() {
        let parts = vec![vec![1.0, 2.0], vec![], vec![3.0], vec![4.0, 5.0, 6.0]];
        let mut lent = HostFrames::lent(Box::new(Fixed(vec![0.0; 8])));
        assert!(lent.push(&[9.0]));
        assert!(lent.push_parts(&parts));
        assert_eq!(lent.as_slice(), &[9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(!lent.push_parts(&parts), "no room: refused");
        assert_eq!(lent.len(), 7, "nothing written");
        let mut plain = HostFrames::default();
        assert!(plain.push_parts(&parts));
        assert_eq!(plain.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}

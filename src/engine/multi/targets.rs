//! A batch's targets kept with their own copy of the data until it is
//! sent, and the targets of a piece of a call.

use std::ops::Range;

use crate::engine::{FrameTargets, Selection};
use crate::{Error, Result};

/// [`FrameTargets`] with their own copy of the data.
pub(super) enum OwnedTargets {
    Global,
    Aligned(Vec<u32>),
    Weighted {
        offsets: Vec<usize>,
        pairs: Vec<(u32, f32)>,
    },
    Selected {
        offsets: Vec<usize>,
        components: Vec<u32>,
        weights: Option<Vec<f32>>,
    },
}

impl OwnedTargets {
    pub(super) fn of(t: &FrameTargets<'_>) -> Self {
        match *t {
            FrameTargets::Global => OwnedTargets::Global,
            FrameTargets::Aligned(s) => OwnedTargets::Aligned(s.to_vec()),
            FrameTargets::Weighted { offsets, pairs } => OwnedTargets::Weighted {
                offsets: offsets.to_vec(),
                pairs: pairs.to_vec(),
            },
            FrameTargets::Selected(sel) => OwnedTargets::Selected {
                offsets: sel.offsets.to_vec(),
                components: sel.components.to_vec(),
                weights: sel.weights.map(<[f32]>::to_vec),
            },
        }
    }

    pub(super) fn as_targets(&self) -> FrameTargets<'_> {
        match self {
            OwnedTargets::Global => FrameTargets::Global,
            OwnedTargets::Aligned(s) => FrameTargets::Aligned(s),
            OwnedTargets::Weighted { offsets, pairs } => FrameTargets::Weighted { offsets, pairs },
            OwnedTargets::Selected {
                offsets,
                components,
                weights,
            } => FrameTargets::Selected(Selection {
                offsets,
                components,
                weights: weights.as_deref(),
            }),
        }
    }
}

/// The targets of frames `rows` of a batch; a weighted batch's offsets are
/// rebased into `offsets`. Targets that do not fit the batch are an error.
pub(super) fn piece_targets<'a: 'b, 'b>(
    targets: &FrameTargets<'a>,
    rows: Range<usize>,
    offsets: &'b mut Vec<usize>,
) -> Result<FrameTargets<'b>> {
    let bad = || Error::Mismatch("frame targets do not match the frames of the batch".into());
    Ok(match *targets {
        FrameTargets::Global => FrameTargets::Global,
        FrameTargets::Aligned(s) => FrameTargets::Aligned(s.get(rows).ok_or_else(bad)?),
        FrameTargets::Weighted {
            offsets: o,
            pairs: p,
        } => {
            let o = o.get(rows.start..rows.end + 1).ok_or_else(bad)?;
            let (first, last) = (o[0], o[o.len() - 1]);
            let pairs = p.get(first..last).ok_or_else(bad)?;
            offsets.clear();
            offsets.extend(o.iter().map(|&x| x.wrapping_sub(first)));
            FrameTargets::Weighted { offsets, pairs }
        }
        FrameTargets::Selected(sel) => {
            let o = sel.offsets.get(rows.start..rows.end + 1).ok_or_else(bad)?;
            let (first, last) = (o[0], o[o.len() - 1]);
            let components = sel.components.get(first..last).ok_or_else(bad)?;
            let weights = match sel.weights {
                Some(w) => Some(w.get(rows).ok_or_else(bad)?),
                None => None,
            };
            offsets.clear();
            offsets.extend(o.iter().map(|&x| x.wrapping_sub(first)));
            FrameTargets::Selected(Selection {
                offsets,
                components,
                weights,
            })
        }
    })
}

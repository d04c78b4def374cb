//! Which states' log-likelihoods each utterance of a batch needs: forced
//! alignment searches an utterance's training graph, which reaches only the
//! pdfs of its transcript, so an engine that scores every state on a device
//! need copy back only those columns
//! ([`super::LoadedModel::state_loglikes_subset`]).

use crate::{Error, Result};

/// The utterances of a batch, in order, each with its frames (consecutive
/// rows of the batch) and the states it needs (its columns, in the order
/// given). The output of a subset call holds, utterance after utterance,
/// `frames × columns` values, row-major.
#[derive(Debug, Clone, Default)]
pub struct StateSubsets {
    frames: Vec<usize>,
    /// Utterance `u`'s states are `states[first[u]..first[u + 1]]`.
    states: Vec<u32>,
    first: Vec<usize>,
}

impl StateSubsets {
    pub fn new() -> Self {
        StateSubsets {
            first: vec![0],
            ..Self::default()
        }
    }

    /// Add the next utterance: `frames` rows needing `states`.
    pub fn push(&mut self, frames: usize, states: &[u32]) {
        if self.first.is_empty() {
            self.first.push(0);
        }
        self.frames.push(frames);
        self.states.extend_from_slice(states);
        self.first.push(self.states.len());
    }

    pub fn clear(&mut self) {
        self.frames.clear();
        self.states.clear();
        self.first.clear();
        self.first.push(0);
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frames of utterance `u`.
    pub fn frames(&self, u: usize) -> usize {
        self.frames[u]
    }

    /// States (columns) of utterance `u`.
    pub fn states(&self, u: usize) -> &[u32] {
        &self.states[self.first[u]..self.first[u + 1]]
    }

    pub fn total_frames(&self) -> usize {
        self.frames.iter().sum()
    }

    /// Values of the output: Σ frames × columns.
    pub fn output_len(&self) -> usize {
        (0..self.len())
            .map(|u| self.frames[u] * self.states(u).len())
            .sum()
    }

    /// `out` cut into each utterance's `frames × columns` block.
    pub fn split_mut<'o>(&self, mut out: &'o mut [f32]) -> Vec<&'o mut [f32]> {
        (0..self.len())
            .map(|u| {
                let (this, rest) =
                    std::mem::take(&mut out).split_at_mut(self.frames[u] * self.states(u).len());
                out = rest;
                this
            })
            .collect()
    }

    /// `out` cut into each utterance's `frames × columns` block.
    pub fn split<'o>(&self, mut out: &'o [f32]) -> Vec<&'o [f32]> {
        (0..self.len())
            .map(|u| {
                let (this, rest) = out.split_at(self.frames[u] * self.states(u).len());
                out = rest;
                this
            })
            .collect()
    }

    /// An error unless these subsets fit a batch of `frames` frames scored
    /// against `num_states` states into `out_len` values.
    pub fn check(&self, frames: usize, num_states: usize, out_len: usize) -> Result<()> {
        if self.total_frames() != frames {
            return Err(Error::Mismatch(format!(
                "state subsets cover {} frames, the batch has {frames}",
                self.total_frames()
            )));
        }
        if let Some(&s) = self.states.iter().find(|&&s| s as usize >= num_states) {
            return Err(Error::Mismatch(format!(
                "state {s} out of range (the model has {num_states})"
            )));
        }
        if self.output_len() != out_len {
            return Err(Error::Mismatch(format!(
                "output holds {out_len} values, the state subsets need {}",
                self.output_len()
            )));
        }
        Ok(())
    }

    /// Each utterance's columns of `all` (`frames × num_states`, the whole
    /// batch) into `out`. Call [`Self::check`] first.
    pub fn gather(&self, all: &[f32], num_states: usize, out: &mut [f32]) {
        let mut row = 0;
        for (u, block) in self.split_mut(out).into_iter().enumerate() {
            let states = self.states(u);
            for (t, o) in block.chunks_exact_mut(states.len().max(1)).enumerate() {
                let src = &all[(row + t) * num_states..(row + t + 1) * num_states];
                for (v, &s) in o.iter_mut().zip(states) {
                    *v = src[s as usize];
                }
            }
            row += self.frames[u];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_each_utterances_columns_and_checks_sizes() {
        let mut s = StateSubsets::new();
        s.push(2, &[3, 0]);
        s.push(0, &[1]);
        s.push(1, &[]);
        s.push(1, &[2]);
        assert_eq!((s.len(), s.total_frames(), s.output_len()), (4, 4, 5));
        // 4 frames × 4 states: value = 10 · frame + state.
        let all: Vec<f32> = (0..16).map(|i| (10 * (i / 4) + i % 4) as f32).collect();
        let mut out = vec![0f32; 5];
        s.check(4, 4, 5).unwrap();
        s.gather(&all, 4, &mut out);
        assert_eq!(out, [3.0, 0.0, 13.0, 10.0, 32.0]);
        let parts = s.split(&out);
        assert_eq!(parts[0].len(), 4);
        assert_eq!(parts[3], &[32.0]);
        assert!(s.check(5, 4, 5).unwrap_err().to_string().contains("5"));
        assert!(s
            .check(4, 3, 5)
            .unwrap_err()
            .to_string()
            .contains("state 3"));
        assert!(s.check(4, 4, 6).is_err());
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.output_len(), 0);
    }
}

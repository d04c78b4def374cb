//! HTK embedded Baum-Welch re-estimation, as HERest does it: for each
//! utterance the sentence HMM of its label sequence ([`sentence`]), HFB's
//! pruned forward-backward ([`fb`]), statistics attached to the shared objects
//! of the HMM set ([`accs`]), and HERest's update rules ([`update`]).
//! [`herest`] drives a whole pass. The Gaussian work (state and component
//! log-likelihoods, mixture statistics) is done either in HTK's own float
//! arithmetic ([`score`], [`sink`]; reproduces HERest's numbers) or by an
//! [`crate::engine`] (CPU or GPU); the forward-backward runs on the CPU across
//! utterances (rayon). Nothing here parses command lines.

pub mod accfile;
pub mod accs;
pub mod fb;
pub mod herest;
pub mod labels;
pub mod score;
pub mod sentence;
pub mod sink;
pub mod update;

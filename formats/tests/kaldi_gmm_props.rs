//! Round-trip property tests for every Kaldi GMM object, binary and text.
//!
//! Binary: read(write(x)) == x exactly. Text keeps 7 significant digits, so:
//! write_text(read(write_text(x))) == write_text(x), and text -> binary ->
//! binary is stable.

use amtool_formats::kaldi::accs::{AccumAmDiagGmm, AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::gmm::{AmDiagGmm, DiagGmm, FullGmm};
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::transition::{HmmState, Topology, TransitionModel, Tuple, NO_PDF};
use proptest::collection::vec;
use proptest::prelude::*;

fn f32_any() -> impl Strategy<Value = f32> {
    any::<f32>().prop_filter("no NaN", |x| !x.is_nan())
}

fn f64_from_f32() -> impl Strategy<Value = f64> {
    // Accumulators are written as float: values that are exact floats survive.
    f32_any().prop_map(|x| x as f64)
}

fn roundtrip<T, R, W>(x: &T, read: R, write: W) -> Result<(), TestCaseError>
where
    T: PartialEq + std::fmt::Debug,
    R: Fn(&[u8]) -> amtool_formats::Result<T>,
    W: Fn(&T, bool) -> Vec<u8>,
{
    roundtrip_as(x, read, write, false)
}

/// [`roundtrip`]; `recomputed`: reading derives part of the object from the
/// rest (a diagonal GMM's gconsts, as Kaldi's `Read` does), so text read
/// back is stable from the second reading on, once the parameters are the
/// 7-digit ones the gconsts are computed from.
fn roundtrip_as<T, R, W>(x: &T, read: R, write: W, recomputed: bool) -> Result<(), TestCaseError>
where
    T: PartialEq + std::fmt::Debug,
    R: Fn(&[u8]) -> amtool_formats::Result<T>,
    W: Fn(&T, bool) -> Vec<u8>,
{
    let b = write(x, true);
    let y = read(&b).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&y, x);
    let text_of = |t: &[u8]| -> Result<T, TestCaseError> {
        read(t).map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(t))))
    };
    let mut t = write(x, false);
    let mut z = text_of(&t)?;
    if recomputed {
        t = write(&z, false);
        z = text_of(&t)?;
    }
    prop_assert_eq!(write(&z, false), t);
    // Text -> binary -> read -> binary is stable (accumulators read from text
    // hold the printed decimal as a double, as Kaldi's do; binary stores float).
    let zb = write(&z, true);
    let zz = read(&zb).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(write(&zz, true), zb);
    Ok(())
}

fn inv_var() -> impl Strategy<Value = f32> {
    f32_any()
        .prop_map(|x| x.abs())
        .prop_filter("> 0, finite", |x| *x > 0.0 && x.is_finite())
}

/// A diagonal GMM as Kaldi reads one: weights ≥ 0, inverse variances > 0,
/// and its gconsts computed from them (reading recomputes them; a GMM whose
/// gconsts come out NaN is one Kaldi refuses, left out here).
fn diag_gmm(dim: usize) -> impl Strategy<Value = DiagGmm> {
    (1usize..5).prop_flat_map(move |n| {
        (
            vec(0f32..=1.0, n),
            vec(f32_any().prop_filter("finite", |x| x.is_finite()), n * dim),
            vec(inv_var(), n * dim),
        )
            .prop_filter_map("NaN gconst", move |(weights, means_invvars, inv_vars)| {
                let mut g = DiagGmm {
                    dim,
                    gconsts: vec![],
                    weights,
                    means_invvars,
                    inv_vars,
                };
                g.compute_gconsts().ok().map(|_| g)
            })
    })
}

fn full_gmm() -> impl Strategy<Value = FullGmm> {
    (1usize..4, 1usize..4).prop_flat_map(|(n, dim)| {
        (
            vec(f32_any(), n),
            vec(f32_any(), n),
            vec(f32_any(), n * dim),
            vec(f32_any(), n * dim * (dim + 1) / 2),
        )
            .prop_map(
                move |(gconsts, weights, means_invcovars, inv_covars)| FullGmm {
                    dim,
                    gconsts,
                    weights,
                    means_invcovars,
                    inv_covars,
                },
            )
    })
}

/// A valid topology: `n_entries` left-to-right HMMs with 1..3 emitting states;
/// non-HMM (separate self-loop pdf classes) when `hmm` is false.
fn topology() -> impl Strategy<Value = Topology> {
    (vec(1usize..4, 1..3), any::<bool>(), 1usize..4).prop_map(|(sizes, hmm, extra_phones)| {
        let entries: Vec<Vec<HmmState>> = sizes
            .iter()
            .map(|&ne| {
                let mut states: Vec<HmmState> = (0..ne)
                    .map(|j| HmmState {
                        forward_pdf_class: j as i32,
                        self_loop_pdf_class: if hmm { j as i32 } else { (ne + j) as i32 },
                        transitions: vec![(j as i32, 0.75), (j as i32 + 1, 0.25)],
                    })
                    .collect();
                states.push(HmmState {
                    forward_pdf_class: NO_PDF,
                    self_loop_pdf_class: NO_PDF,
                    transitions: vec![],
                });
                states
            })
            .collect();
        // Phones 1..: entry i gets phone i+1, the extra phones go to entry 0.
        let nphones = entries.len() + extra_phones;
        let mut phone2idx = vec![-1];
        for p in 1..=nphones {
            phone2idx.push(if p <= entries.len() { p as i32 - 1 } else { 0 });
        }
        Topology {
            phones: (1..=nphones as i32).collect(),
            phone2idx,
            entries,
        }
    })
}

fn transition_model() -> impl Strategy<Value = TransitionModel> {
    (topology(), 1i32..6)
        .prop_flat_map(|(topo, npdfs)| {
            let mut slots = Vec::new();
            for &p in &topo.phones {
                let e = topo.entry_for_phone(p).unwrap();
                for (j, s) in e.iter().enumerate() {
                    if s.forward_pdf_class != NO_PDF {
                        slots.push((p, j as i32, s.transitions.len()));
                    }
                }
            }
            let hmm = topo.is_hmm();
            let ns = slots.len();
            (
                Just(topo),
                Just(slots),
                vec(0..npdfs, ns),
                vec(0..npdfs, ns),
                Just(hmm),
            )
        })
        .prop_flat_map(|(topo, slots, fwd, sl, hmm)| {
            let tuples: Vec<Tuple> = slots
                .iter()
                .enumerate()
                .map(|(i, &(phone, hmm_state, _))| Tuple {
                    phone,
                    hmm_state,
                    forward_pdf: fwd[i],
                    self_loop_pdf: if hmm { fwd[i] } else { sl[i] },
                })
                .collect();
            let ntids: usize = slots.iter().map(|s| s.2).sum();
            (Just(topo), Just(tuples), vec(-50f32..=0.0, ntids))
        })
        .prop_map(|(topo, tuples, lp)| {
            let mut log_probs = vec![0.0];
            log_probs.extend(lp);
            TransitionModel::new(topo, tuples, log_probs).unwrap()
        })
}

fn kaldi_model() -> impl Strategy<Value = KaldiModel> {
    (transition_model(), 1usize..4).prop_flat_map(|(trans, dim)| {
        let n = trans.num_pdfs();
        (Just(trans), vec(diag_gmm(dim), n)).prop_map(move |(trans, pdfs)| KaldiModel {
            trans,
            am: AmDiagGmm { dim, pdfs },
        })
    })
}

fn accum_diag(dim: usize, flags_sel: u8) -> impl Strategy<Value = AccumDiagGmm> {
    let flags = [7u16, 5, 4, 15][flags_sel as usize % 4];
    (1usize..4).prop_flat_map(move |n| {
        let a = AccumDiagGmm::new(n, dim, flags);
        let (m, v) = (a.mean_accs.len(), a.var_accs.len());
        (
            vec(f64_from_f32(), n),
            vec(f64_from_f32(), m),
            vec(f64_from_f32(), v),
        )
            .prop_map(move |(o, mm, vv)| AccumDiagGmm {
                occupancy: o,
                mean_accs: mm,
                var_accs: vv,
                ..a.clone()
            })
    })
}

fn accum_full() -> impl Strategy<Value = AccumFullGmm> {
    (1usize..4, 1usize..4, any::<bool>()).prop_flat_map(|(n, dim, vars)| {
        let plen = if vars { n * dim * (dim + 1) / 2 } else { 0 };
        (
            vec(f64_from_f32(), n),
            vec(f64_from_f32(), n * dim),
            vec(f64_from_f32(), plen),
        )
            .prop_map(move |(o, m, c)| AccumFullGmm {
                dim,
                num_comp: n,
                flags: if vars { 7 } else { 5 },
                occupancy: o,
                mean_accs: m,
                centered_covar_accs: c,
            })
    })
}

fn am_accs() -> impl Strategy<Value = AmAccs> {
    (1usize..4, any::<u8>()).prop_flat_map(|(dim, fl)| {
        (
            vec(any::<f64>().prop_filter("no NaN", |x| !x.is_nan()), 1..12),
            vec(accum_diag(dim, fl), 1..4),
            any::<f64>(),
            any::<f64>(),
        )
            .prop_filter("no NaN", |(_, _, a, b)| !a.is_nan() && !b.is_nan())
            .prop_map(|(t, pdfs, total_like, total_frames)| AmAccs {
                transition_accs: t,
                gmm: AccumAmDiagGmm {
                    pdfs,
                    total_like,
                    total_frames,
                },
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn diag_gmm_roundtrips(g in (1usize..5).prop_flat_map(diag_gmm)) {
        roundtrip_as(&g, DiagGmm::from_bytes, DiagGmm::to_bytes, true)?;
    }

    #[test]
    fn full_gmm_roundtrips(g in full_gmm()) {
        roundtrip(&g, FullGmm::from_bytes, FullGmm::to_bytes)?;
    }

    #[test]
    fn topology_roundtrips(t in topology()) {
        roundtrip(&t, Topology::from_bytes, Topology::to_bytes)?;
    }

    #[test]
    fn transition_model_roundtrips(t in transition_model()) {
        roundtrip(&t, TransitionModel::from_bytes, TransitionModel::to_bytes)?;
        // The form written follows the topology, as in Kaldi.
        let text = String::from_utf8(t.to_bytes(false)).unwrap();
        prop_assert_eq!(text.contains("<Triples>"), t.topology().is_hmm());
    }

    #[test]
    fn model_roundtrips(m in kaldi_model()) {
        roundtrip_as(&m, KaldiModel::from_bytes, KaldiModel::to_bytes, true)?;
    }

    #[test]
    fn diag_accs_roundtrip(a in (1usize..5, any::<u8>()).prop_flat_map(|(d, f)| accum_diag(d, f))) {
        roundtrip(&a, AccumDiagGmm::from_bytes, AccumDiagGmm::to_bytes)?;
    }

    #[test]
    fn full_accs_roundtrip(a in accum_full()) {
        roundtrip(&a, AccumFullGmm::from_bytes, AccumFullGmm::to_bytes)?;
    }

    #[test]
    fn am_accs_roundtrip(a in am_accs()) {
        roundtrip(&a, AmAccs::from_bytes, AmAccs::to_bytes)?;
    }

    /// Arbitrary bytes never panic any reader.
    #[test]
    fn readers_never_panic(data in vec(any::<u8>(), 0..200), binary in any::<bool>()) {
        let mut d = if binary { b"\0B".to_vec() } else { vec![] };
        d.extend(data);
        let _ = KaldiModel::from_bytes(&d);
        let _ = DiagGmm::from_bytes(&d);
        let _ = FullGmm::from_bytes(&d);
        let _ = AmAccs::from_bytes(&d);
        let _ = AccumDiagGmm::from_bytes(&d);
        let _ = AccumFullGmm::from_bytes(&d);
        let _ = Topology::from_bytes(&d);
        let _ = amtool_formats::kaldi::model::ObjectKind::detect(&d);
    }

    /// Mutated real files never panic and, when they fail, name a byte offset.
    #[test]
    fn mutated_model_never_panics(idx in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut b = std::fs::read("../testdata/kaldi/init.mdl").unwrap();
        let i = idx.index(b.len());
        b[i] = byte;
        if let Err(e) = KaldiModel::from_bytes(&b) {
            prop_assert!(e.to_string().contains("at byte"), "{}", e);
        }
    }
}

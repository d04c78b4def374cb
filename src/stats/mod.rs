//! Sufficient statistics (f64 on the host) and the update rules that turn them
//! into new parameters: MLE (Kaldi's MleDiagGmmUpdate / MleFullGmmUpdate, HTK's
//! HERest rules), MAP, and transition updates.

pub mod accumulators;
pub mod linalg;
pub mod mixture_split;
pub mod mle_diag;
pub mod mle_full;
pub mod transition;

pub use accumulators::{GmmAccumulator, ModelAccumulators, UpdateFlags};

/// Formats a number as a C++ stream does by default (`std::cout << x`:
/// `%g` with 6 significant digits), which is how Kaldi prints the numbers in
/// its log lines; recipes and people compare those strings.
pub fn fmt_g(x: f64) -> String {
    fmt_g_prec(x, 6)
}

/// `%g` with `prec` significant digits (C's rules: scientific when the
/// exponent is < −4 or ≥ prec; trailing zeros removed).
pub fn fmt_g_prec(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let p = prec.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, x)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_cpp_streams() {
        assert_eq!(fmt_g(-86.255), "-86.255");
        assert_eq!(fmt_g(8445.0), "8445");
        assert_eq!(fmt_g(0.00446784), "0.00446784");
        assert_eq!(fmt_g(2.25708e-05), "2.25708e-05");
        assert_eq!(fmt_g(4.407723), "4.40772");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g(100000.0), "100000");
        assert_eq!(fmt_g(0.0001), "0.0001");
        assert_eq!(fmt_g(1.0), "1");
        assert_eq!(fmt_g(0.0), "0");
        assert_eq!(fmt_g(-0.0), "-0");
        assert_eq!(fmt_g(0.999_999_7), "1");
    }
}

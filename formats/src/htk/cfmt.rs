//! C `printf` number formats that HTK's text files use (`%e`, `%f`), so our text
//! output is byte-identical to HTK's.

/// C's `%e` (6 digits after the point, at least two exponent digits) of a float
/// promoted to double, as `fprintf(f," %e",x)` prints it.
pub fn fmt_e(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let s = format!("{x:.6e}");
    // Rust gives e.g. "1.234560e2" / "-1.0e-5"; C wants "1.234560e+02".
    let (mant, exp) = match s.split_once('e') {
        Some(p) => p,
        None => return s,
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mant}e{sign}{:02}", exp.abs())
}

/// C's `%f` (6 digits after the point).
pub fn fmt_f(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    format!("{x:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_c_printf() {
        assert_eq!(fmt_e(0.0), "0.000000e+00");
        assert_eq!(fmt_e(-22.3909), "-2.239090e+01");
        assert_eq!(fmt_e(1e-5), "1.000000e-05");
        assert_eq!(fmt_e(1.5e300), "1.500000e+300");
        assert_eq!(fmt_e(f64::from(0.80602837f32)), "8.060284e-01");
        assert_eq!(fmt_f(-564.6917114), "-564.691711");
    }
}

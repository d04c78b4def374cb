//! HTK parameter kinds (`MFCC_0_D_A`, `WAVEFORM`, ...): the 6-bit base kind plus
//! qualifier bits, as HParm.h defines them, and their string forms as
//! `ParmKind2Str`/`Str2ParmKind` write and read them.

use std::fmt;
use std::str::FromStr;

/// The base kinds, numbered as in HParm.h (`BASEMASK` = 077).
pub const BASE_NAMES: [&str; 13] = [
    "WAVEFORM",
    "LPC",
    "LPREFC",
    "LPCEPSTRA",
    "LPDELCEP",
    "IREFC",
    "MFCC",
    "FBANK",
    "MELSPEC",
    "USER",
    "DISCRETE",
    "PLP",
    "ANON",
];

pub const WAVEFORM: u16 = 0;
pub const LPC: u16 = 1;
pub const LPREFC: u16 = 2;
pub const LPCEPSTRA: u16 = 3;
pub const LPDELCEP: u16 = 4;
pub const IREFC: u16 = 5;
pub const MFCC: u16 = 6;
pub const FBANK: u16 = 7;
pub const MELSPEC: u16 = 8;
pub const USER: u16 = 9;
pub const DISCRETE: u16 = 10;
pub const PLP: u16 = 11;
pub const ANON: u16 = 12;

pub const BASEMASK: u16 = 0o77;
/// `_E` log energy.
pub const HASENERGY: u16 = 0o100;
/// `_N` absolute energy suppressed.
pub const HASNULLE: u16 = 0o200;
/// `_D` deltas.
pub const HASDELTA: u16 = 0o400;
/// `_A` accelerations.
pub const HASACCS: u16 = 0o1000;
/// `_C` compressed.
pub const HASCOMPX: u16 = 0o2000;
/// `_Z` zero mean.
pub const HASZEROM: u16 = 0o4000;
/// `_K` CRC checksum appended.
pub const HASCRCC: u16 = 0o10000;
/// `_0` 0th cepstral coefficient.
pub const HASZEROC: u16 = 0o20000;
/// `_V` VQ indices attached.
pub const HASVQ: u16 = 0o40000;
/// `_T` third differentials.
pub const HASTHIRD: u16 = 0o100000;

/// Qualifier letters in the order `ParmKind2Str` appends them.
const QUALIFIERS: [(char, u16); 10] = [
    ('E', HASENERGY),
    ('N', HASNULLE),
    ('D', HASDELTA),
    ('A', HASACCS),
    ('C', HASCOMPX),
    ('Z', HASZEROM),
    ('K', HASCRCC),
    ('0', HASZEROC),
    ('V', HASVQ),
    ('T', HASTHIRD),
];

/// A parameter kind: base kind in the low 6 bits, qualifiers above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParmKind(pub u16);

impl ParmKind {
    pub fn new(base: u16, qualifiers: u16) -> Self {
        ParmKind((base & BASEMASK) | (qualifiers & !BASEMASK))
    }
    pub fn base(self) -> u16 {
        self.0 & BASEMASK
    }
    pub fn has(self, q: u16) -> bool {
        self.0 & q != 0
    }
    pub fn with(self, q: u16) -> Self {
        ParmKind(self.0 | q)
    }
    pub fn without(self, q: u16) -> Self {
        ParmKind(self.0 & !q)
    }
    /// Whether the base kind is one HTK knows (0..=12).
    pub fn is_valid(self) -> bool {
        (self.base() as usize) < BASE_NAMES.len()
    }
}

impl fmt::Display for ParmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match BASE_NAMES.get(self.base() as usize) {
            Some(name) => f.write_str(name)?,
            None => write!(f, "BASE{}", self.base())?,
        }
        for (c, bit) in QUALIFIERS {
            if self.0 & bit != 0 {
                write!(f, "_{c}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for ParmKind {
    type Err = String;
    /// As `Str2ParmKind`: qualifiers are stripped from the end in any order, the
    /// rest must be a base kind name.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut rest = s;
        let mut quals = 0u16;
        while rest.len() > 2 && rest.as_bytes()[rest.len() - 2] == b'_' {
            let c = rest.as_bytes()[rest.len() - 1] as char;
            match QUALIFIERS.iter().find(|(q, _)| *q == c) {
                Some((_, bit)) => quals |= bit,
                None => return Err(format!("unknown parameter kind qualifier '_{c}' in '{s}'")),
            }
            rest = &rest[..rest.len() - 2];
        }
        match BASE_NAMES.iter().position(|n| *n == rest) {
            Some(b) => Ok(ParmKind::new(b as u16, quals)),
            None => Err(format!("unknown parameter kind '{s}'")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_htk_order() {
        let k: ParmKind = "MFCC_0_D_A_C_K".parse().unwrap();
        assert_eq!(k.to_string(), "MFCC_D_A_C_K_0");
        assert_eq!(
            k.0,
            MFCC | HASZEROC | HASDELTA | HASACCS | HASCOMPX | HASCRCC
        );
        assert_eq!(
            "DISCRETE_K".parse::<ParmKind>().unwrap().0,
            DISCRETE | HASCRCC
        );
        assert!("MFCC_X".parse::<ParmKind>().is_err());
        assert!("FOO".parse::<ParmKind>().is_err());
    }
}

//! `amtool copy [--binary=true|false] IN OUT`: Kaldi's copy-feats, copy-matrix,
//! copy-vector, copy-int-vector and copy-post (and the single-object copies of
//! gmm-copy, gmm-global-copy, fgmm-global-copy), converting between binary and
//! text.
//!
//! When IN and OUT are table specifiers (`ark:`, `scp:`, ...) every entry is
//! copied; the object type is detected from the first entry
//! (`amtool_formats::kaldi::any`). Otherwise IN is one object file (`-` =
//! stdin, `cmd |` = pipe) whose kind is detected by [`copy_single_object`],
//! and OUT is written atomically.
//!
//! HTK files are copied too: an MMF (text or binary, detected) is written as
//! an HTK binary (`--binary=true`) or text MMF in HTK's own layout; an HTK
//! parameter file given as IN is written as a Kaldi feature matrix (binary or
//! `--binary=false` text); `--htk-in` reads a table of HTK parameter files
//! (`scp:` of `key file.mfc` lines), as Kaldi's `copy-feats --htk-in`. The
//! other direction is `amtool copy-to-htk` (`copy-feats-to-htk`).
//! Lattice archives are copied as lattice-copy does: `--write-compact=true`
//! (lattice-copy's default) writes `CompactLattice`s, `--write-compact=false`
//! non-compact `Lattice`s, converting as Kaldi's `ConvertLattice` does; `amtool
//! copy` without the option keeps each archive's type.
//!
//! `amtool copy` keeps matrices as stored (float, double or compressed), so a
//! binary copy is byte-identical. Run as `copy-feats`/`copy-matrix` it does what
//! those tools do: matrices become float (decompressed), or are compressed with
//! `--compress=true --compression-method=N`.

use clap::Args;

use amtool_formats::htk::mmf::HmmSet;
use amtool_formats::htk::param::ParamFile;
use amtool_formats::kaldi::any::{detect_entry, AnyObject, ObjectType};
use amtool_formats::kaldi::compressed::{CompressedMatrix, CompressionMethod};
use amtool_formats::kaldi::files::{printable_rx, printable_wx, read_rxfilename, write_wxfilename};
use amtool_formats::kaldi::holder::{Basic, Holder};
use amtool_formats::kaldi::matrix::{Matrix, PackedMatrix, Vector};
use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::object::{object_to_bytes, read_object, KaldiObject};
use amtool_formats::kaldi::specifier::{is_table_specifier, RSpecifier, RxFilename, TableKind};
use amtool_formats::kaldi::sphinx::SphinxFeatures;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};
use amtool_formats::Error as FormatError;

use super::copy_options::{gmm_copy_parts, Edits, Place};
use super::{kaldi, KaldiStandard};

#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write in binary mode (single objects; for tables the wspecifier's `t`/`b` decides, as in Kaldi).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Compress matrices (as copy-feats --compress=true).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub compress: bool,
    /// Compression method: 1 auto, 2 speech feature (CM), 3 two-byte auto (CM2),
    /// 4 two-byte signed integer, 5 one-byte auto (CM3), 6 one-byte unsigned integer, 7 one-byte 0..1.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub compression_method: i32,
    /// Read the input table's objects as HTK parameter files (copy-feats --htk-in).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub htk_in: bool,
    /// Lattices: write CompactLattice (true) or non-compact Lattice (false), as lattice-copy
    /// (default there: true). Unset, `amtool copy` keeps lattices as stored.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub write_compact: Option<bool>,
    /// Tables: copy only the keys listed (first field of each line of this text file), as lattice-copy.
    #[arg(long, value_name = "RXFILENAME")]
    pub include: Option<String>,
    /// Tables: copy all but the keys listed (first field of each line of this text file), as lattice-copy.
    #[arg(long, value_name = "RXFILENAME")]
    pub exclude: Option<String>,
    /// Tables: exit with status 0 even if nothing was copied, as lattice-copy.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub ignore_missing: bool,
    /// Tables of matrices: also write each utterance's number of frames (rows) to this
    /// wspecifier, e.g. 'ark,t:utt2num_frames' (copy-feats).
    #[arg(long, value_name = "WSPECIFIER", default_value = "")]
    pub write_num_frames: String,
    /// Read the input table's objects as CMU Sphinx feature files (13-dimensional,
    /// big-endian), as copy-feats --sphinx-in.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub sphinx_in: bool,
    /// Scale matrices (copy-matrix), vectors (copy-vector: tables only, as Kaldi's) or
    /// posterior weights (copy-post) by this factor.
    #[arg(long, value_name = "FLOAT", default_value_t = 1.0)]
    pub scale: f32,
    /// Matrices: take the log of each element, floored at 1e-20 first (copy-matrix).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub apply_log: bool,
    /// Matrices: exponentiate each element (copy-matrix).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub apply_exp: bool,
    /// Matrices: raise each element to this power (copy-matrix).
    #[arg(long, value_name = "FLOAT", default_value_t = 1.0)]
    pub apply_power: f32,
    /// Matrices: replace each row by its softmax (copy-matrix).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub apply_softmax_per_row: bool,
    /// Vectors: truncate or zero-pad to this dimension; -1 keeps it (copy-vector's --change_dim).
    #[arg(long, value_name = "N", default_value_t = -1)]
    pub change_dim: i32,
    /// Models: copy the transition model (gmm-copy; false reads and writes the AmDiagGmm alone).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub copy_tm: bool,
    /// Models: copy the acoustic model, the AmDiagGmm (gmm-copy; false writes the transition
    /// model alone).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub copy_am: bool,
    /// The Kaldi tool this copy stands in for (set by the shims: copy-feats, copy-matrix, ...).
    #[arg(long, hide = true, default_value = "amtool-copy")]
    pub kaldi_tool: String,
    /// Input: an rspecifier (ark:..., scp:...) or an rxfilename (file, -, "cmd |").
    #[arg(value_name = "IN")]
    pub input: String,
    /// Output: a wspecifier (ark:..., ark,t:..., ark,scp:...) or a wxfilename (file, -, "| cmd").
    #[arg(value_name = "OUT")]
    pub output: String,
}

/// Run `amtool copy`; returns the exit status.
pub fn run(args: CopyArgs) -> i32 {
    let res = if is_table_specifier(&args.input) || is_table_specifier(&args.output) {
        copy_table(&args)
    } else {
        copy_single(&args)
    };
    match res {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn method(args: &CopyArgs) -> Result<Option<CompressionMethod>, String> {
    if !args.compress {
        return Ok(None);
    }
    CompressionMethod::from_i32(args.compression_method)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "invalid --compression-method={} (expected 1..7)",
                args.compression_method
            )
        })
}

/// Float tools (copy-feats, copy-matrix, copy-vector) read everything as
/// `Matrix<BaseFloat>` / `Vector<BaseFloat>`.
fn as_float_tool(tool: &str) -> bool {
    matches!(tool, "copy-feats" | "copy-matrix" | "copy-vector")
}

/// The type a Kaldi copy tool reads its table entries as. Binary entries say
/// what they are; text ones do not always (a one-line matrix looks like a
/// vector, a vector like a posterior), so the tool's type decides, as the
/// Kaldi tool's reader does.
fn tool_entry_type(tool: &str, entry: &[u8]) -> Option<ObjectType> {
    if entry.starts_with(b"\0B") {
        return None;
    }
    match tool {
        "copy-feats" | "copy-matrix" => Some(ObjectType::FloatMatrix),
        "copy-vector" => Some(ObjectType::FloatVector),
        "copy-post" => Some(ObjectType::Posterior),
        "copy-int-vector" => Some(ObjectType::Int32Vector),
        // fstcopy reads FSTs and lattice-copy lattices (either form in text,
        // as Kaldi's lattice reader does): an entry that does not parse as
        // one is an error in that entry, not another kind of object.
        "fstcopy" => Some(ObjectType::Fst),
        "lattice-copy" => Some(
            detect_entry(entry)
                .filter(|t| matches!(t, ObjectType::Lattice | ObjectType::CompactLattice))
                .unwrap_or(ObjectType::CompactLattice),
        ),
        _ => None,
    }
}

/// The same for a single-object file: copy-matrix reads a matrix, copy-vector
/// a vector, whichever of the two the text looks like.
fn tool_object_kind(tool: &str, detected: ObjectKind) -> ObjectKind {
    match (tool, detected) {
        ("copy-feats" | "copy-matrix", ObjectKind::Vector) => ObjectKind::Matrix,
        ("copy-vector", ObjectKind::Matrix) => ObjectKind::Vector,
        _ => detected,
    }
}

/// What happens to each entry of a table on its way out.
struct Plan {
    compress: Option<CompressionMethod>,
    float_tool: bool,
    write_compact: Option<bool>,
    edits: Edits,
}

impl Plan {
    fn new(args: &CopyArgs) -> Result<Plan, String> {
        Ok(Plan {
            compress: method(args)?,
            float_tool: as_float_tool(&args.kaldi_tool),
            write_compact: match args.write_compact {
                None if args.kaldi_tool == "lattice-copy" => Some(true),
                w => w,
            },
            edits: Edits::from_args(args)?,
        })
    }

    /// What the object becomes on output.
    fn transform(&self, obj: AnyObject) -> Result<AnyObject, String> {
        match (obj, self.write_compact) {
            (AnyObject::CompactLattice(c), Some(false)) => Ok(AnyObject::Lattice(c.to_lattice())),
            (AnyObject::Lattice(l), Some(true)) => Ok(AnyObject::CompactLattice(l.to_compact())),
            (obj, _) => {
                let obj = self.edits.apply(obj, Place::Table)?;
                transform_other(obj, self.compress, self.float_tool)
            }
        }
    }
}

fn transform_other(
    obj: AnyObject,
    compress: Option<CompressionMethod>,
    float_tool: bool,
) -> Result<AnyObject, String> {
    if let Some(m) = compress {
        let f = obj.to_float_matrix().ok_or_else(|| {
            format!(
                "--compress=true needs matrices, but the input holds a {}",
                obj.object_type().describe()
            )
        })?;
        return CompressedMatrix::compress(&f, m)
            .map(AnyObject::CompressedMatrix)
            .map_err(|e| e.0);
    }
    if float_tool {
        if let Some(f) = obj.to_float_matrix() {
            return Ok(AnyObject::FloatMatrix(f));
        }
        if let AnyObject::DoubleVector(v) = obj {
            return Ok(AnyObject::FloatVector(v.convert()));
        }
    }
    Ok(obj)
}

fn copy_table(args: &CopyArgs) -> Result<i32, String> {
    if !is_table_specifier(&args.input) || !is_table_specifier(&args.output) {
        return Err(format!(
            "copy: IN and OUT must both be tables (ark:/scp:) or both plain files; got '{}' and '{}'",
            args.input, args.output
        ));
    }
    let plan = Plan::new(args)?;
    if args.htk_in {
        return copy_feature_files(args, &plan, |f: ParamFile| f.to_matrix());
    }
    if args.sphinx_in {
        return copy_feature_files(args, &plan, |f: SphinxFeatures| f.0);
    }
    let spec = RSpecifier::parse(&args.input).map_err(|e| e.0)?;
    let subset = match (&args.include, &args.exclude) {
        (Some(_), Some(_)) => {
            return Err("should not have both --exclude and --include option!".into())
        }
        (Some(f), None) => Some((read_key_list(f)?, true)),
        (None, Some(f)) => Some((read_key_list(f)?, false)),
        (None, None) => None,
    };
    let mut num_total = 0usize;
    let mut reader =
        SequentialTableReader::<AnyObject>::open(&args.input).map_err(|e| e.to_string())?;
    let mut writer = TableWriter::<AnyObject>::open(&args.output).map_err(|e| e.to_string())?;
    let mut num_frames = NumFramesWriter::open(&args.write_num_frames)?;
    let mut kind: Option<ObjectType> = None;
    let mut num_done = 0usize;
    loop {
        let next = if spec.kind == TableKind::Script {
            // Each scp entry is a separate object (ranges applied): detect each.
            reader.next_entry()
        } else {
            reader.next_with(|_, r| {
                let t = match kind {
                    Some(t) => t,
                    None => tool_entry_type(&args.kaldi_tool, r.remaining())
                        .or_else(|| detect_entry(r.remaining()))
                        .ok_or_else(|| {
                        r.error(
                            "cannot tell which Kaldi object this table holds (not a matrix, vector, \
                             alignment, posterior, Gaussian selection, lattice or basic value)",
                        )
                    })?,
                };
                AnyObject::read_as(t, r)
            })
        };
        let Some((key, obj)) = next.map_err(|e| e.to_string())? else {
            break;
        };
        kind.get_or_insert(obj.object_type());
        num_total += 1;
        if let Some((keys, include)) = &subset {
            if *include
                && spec.opts.sorted
                && keys.last().is_some_and(|last| key.as_str() > last.as_str())
            {
                crate::kaldi_log!(
                    "The utterance {key} is larger than the last key in the include list. Not reading further."
                );
                crate::kaldi_log!("Wrote {num_done} utterances");
                writer.close().map_err(|e| e.to_string())?;
                return Ok(0);
            }
            if keys.contains(&key) != *include {
                continue;
            }
        }
        let out = plan
            .transform(obj)
            .map_err(|m| format!("{}: key {key}: {m}", printable_rx(&args.input)))?;
        writer.write(&key, &out).map_err(|e| e.to_string())?;
        num_frames.write(&key, &out)?;
        num_done += 1;
    }
    writer.close().map_err(|e| e.to_string())?;
    num_frames.close()?;
    if subset.is_some() {
        // lattice-copy's subset copy (its compact-lattice branch prints the leading space).
        let space = if kind == Some(ObjectType::CompactLattice) {
            " "
        } else {
            ""
        };
        crate::kaldi_log!("{space}Wrote {num_done} out of {num_total} utterances.");
        return Ok(if num_done != 0 || args.ignore_missing {
            0
        } else {
            1
        });
    }
    match kind {
        Some(t) if t.is_matrix() || plan.compress.is_some() => {
            if args.kaldi_tool == "copy-matrix" {
                crate::kaldi_log!("Copied {num_done} matrices.");
            } else {
                crate::kaldi_log!("Copied {num_done} feature matrices.");
            }
        }
        Some(ObjectType::Int32Vector) => crate::kaldi_log!("Copied {num_done} vectors of int32."),
        Some(ObjectType::FloatVector | ObjectType::DoubleVector) => {
            match plan.edits.vector_log_suffix() {
                s if s.is_empty() => crate::kaldi_log!("Copied {num_done} vectors."),
                s => crate::kaldi_log!("Copied {num_done} vectors{s}"),
            }
        }
        Some(ObjectType::Posterior) => crate::kaldi_log!("Done copying {num_done} posteriors."),
        Some(ObjectType::Lattice | ObjectType::CompactLattice) => {
            crate::kaldi_log!("Done copying {num_done} lattices.")
        }
        Some(t) => crate::kaldi_log!("Copied {num_done} objects ({}).", t.describe()),
        None => crate::kaldi_log!("Copied 0 objects."),
    }
    Ok(if num_done != 0 || args.ignore_missing {
        0
    } else {
        1
    })
}

/// lattice-copy's key list: the first field of each line; an empty line is an error.
fn read_key_list(rx: &str) -> Result<std::collections::BTreeSet<String>, String> {
    let bytes = crate::train::io::read_input(rx).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let mut keys = std::collections::BTreeSet::new();
    for line in text.lines() {
        match line.split([' ', '\t', '\r']).find(|f| !f.is_empty()) {
            Some(k) => keys.insert(k.to_string()),
            None => {
                return Err(format!(
                    "Unable to parse line \"{line}\" encountered in input in {rx}"
                ))
            }
        };
    }
    Ok(keys)
}

/// `copy-feats --htk-in` / `--sphinx-in`: every entry is an HTK parameter
/// file or a Sphinx feature file; its frames are written as a Kaldi float
/// (or, with `--compress`, compressed) matrix.
fn copy_feature_files<H: Holder>(
    args: &CopyArgs,
    plan: &Plan,
    frames: impl Fn(H) -> Matrix<f32>,
) -> Result<i32, String> {
    let mut reader = SequentialTableReader::<H>::open(&args.input).map_err(|e| e.to_string())?;
    let mut writer = TableWriter::<AnyObject>::open(&args.output).map_err(|e| e.to_string())?;
    let mut num_frames = NumFramesWriter::open(&args.write_num_frames)?;
    let mut num_done = 0usize;
    while let Some((key, f)) = reader.next_entry().map_err(|e| e.to_string())? {
        let m = AnyObject::FloatMatrix(frames(f));
        let out = plan
            .edits
            .apply(m, Place::Table)
            .and_then(|m| transform_other(m, plan.compress, true))
            .map_err(|m| format!("{}: key {key}: {m}", printable_rx(&args.input)))?;
        writer.write(&key, &out).map_err(|e| e.to_string())?;
        num_frames.write(&key, &out)?;
        num_done += 1;
    }
    writer.close().map_err(|e| e.to_string())?;
    num_frames.close()?;
    crate::kaldi_log!("Copied {num_done} feature matrices.");
    Ok(if num_done != 0 { 0 } else { 1 })
}

/// copy-feats `--write-num-frames`: each matrix's number of rows, by key, to
/// an int32 table (nothing when the wspecifier is empty).
struct NumFramesWriter(Option<(String, TableWriter<Basic<i32>>)>);

impl NumFramesWriter {
    fn open(wspecifier: &str) -> Result<Self, String> {
        if wspecifier.is_empty() {
            return Ok(NumFramesWriter(None));
        }
        let w = TableWriter::open(wspecifier).map_err(|e| e.to_string())?;
        Ok(NumFramesWriter(Some((wspecifier.to_string(), w))))
    }

    fn write(&mut self, key: &str, obj: &AnyObject) -> Result<(), String> {
        let Some((name, w)) = &mut self.0 else {
            return Ok(());
        };
        let rows = match obj {
            AnyObject::FloatMatrix(m) => m.rows(),
            AnyObject::DoubleMatrix(m) => m.rows(),
            AnyObject::CompressedMatrix(c) => c.rows,
            o => {
                return Err(format!(
                    "--write-num-frames={name}: key {key} holds a {}, not a matrix",
                    o.object_type().describe()
                ))
            }
        };
        let rows = i32::try_from(rows).map_err(|_| format!("{key}: too many frames"))?;
        w.write(key, &Basic(rows)).map_err(|e| e.to_string())
    }

    fn close(self) -> Result<(), String> {
        match self.0 {
            Some((_, w)) => w.close().map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

/// Does the file look like an HTK MMF (first token a macro `~x` or `<BEGINHMM>`)?
/// No Kaldi object starts that way.
pub fn looks_like_mmf(buf: &[u8]) -> bool {
    let start = buf
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(buf.len());
    let rest = &buf[start..];
    rest.starts_with(b"~") || rest.len() >= 10 && rest[..10].eq_ignore_ascii_case(b"<BEGINHMM>")
}

/// Copy an HTK file (MMF or parameter file), if `buf` is one: the bytes to
/// write and the log line, or `None` for a file that is not HTK's.
pub fn copy_htk_object(
    buf: &[u8],
    binary: bool,
    in_name: &str,
    out_name: &str,
) -> Option<Result<(Vec<u8>, String), FormatError>> {
    if ParamFile::looks_like(buf) {
        return Some(ParamFile::parse(buf).map(|f| {
            let m = f.to_matrix();
            let log = format!(
                "Copied HTK parameter file ({}, {} frames of {}) to {out_name} as a Kaldi matrix",
                f.kind,
                m.rows(),
                m.cols()
            );
            (object_to_bytes(&m, binary), log)
        }));
    }
    if looks_like_mmf(buf) {
        return Some(HmmSet::parse(buf, in_name).map(|set| {
            let n = set.hmm_names().count();
            let (bytes, form) = if binary {
                (set.to_binary(None), "binary")
            } else {
                (set.to_text(None), "text")
            };
            (
                bytes,
                format!("Written HTK MMF ({n} HMMs, {form}) to {out_name}"),
            )
        }));
    }
    if let Some(e) = truncated_param_file(buf) {
        return Some(Err(e));
    }
    None
}

/// A binary file whose big-endian header is a plausible HTK header but whose
/// size disagrees with it: say so, rather than "not a Kaldi object".
fn truncated_param_file(buf: &[u8]) -> Option<FormatError> {
    use amtool_formats::htk::param::{ByteOrder, ParamHeader};
    if buf.starts_with(b"\0B")
        || buf.len() < 12
        || !buf[..12].contains(&0)
        || ObjectKind::detect(buf) != ObjectKind::Unknown
    {
        return None;
    }
    let h = ParamHeader::parse(buf, ByteOrder::Big).ok()?;
    let want = h.file_len()?;
    (h.plausible() && want != buf.len()).then(|| {
        FormatError::format(
            amtool_formats::Pos::Byte(buf.len().min(want) as u64),
            format!(
                "HTK parameter file ({}, {} samples of {} bytes) should be {want} bytes, has {}{}",
                h.kind,
                h.n_samples,
                h.samp_size,
                buf.len(),
                if buf.len() < want { ": truncated" } else { "" }
            ),
        )
    })
}

/// Re-encode one object with Kaldi's reader/writer for type `T`.
fn recode<T: KaldiObject>(buf: &[u8], binary: bool) -> Result<Vec<u8>, FormatError> {
    let obj: T = read_object(buf)?;
    Ok(object_to_bytes(&obj, binary))
}

/// Detect what a single-object file holds and re-encode it; returns the bytes
/// and the log line Kaldi's copy tool prints. One function for every kind, so
/// new object kinds are added in one place.
pub fn copy_single_object(
    buf: &[u8],
    binary: bool,
    out_name: &str,
    tool: &str,
) -> Result<(Vec<u8>, String), FormatError> {
    let float_tool = as_float_tool(tool);
    let kind = tool_object_kind(tool, ObjectKind::detect(buf));
    if let Some(wanted) = super::shims::model_kind_read_by(tool).filter(|w| *w != kind) {
        return Err(kind.mismatch_error("", wanted.describe()));
    }
    // The finer type (float/double/compressed/packed) of matrices and vectors.
    let entry_kind = detect_entry(buf);
    Ok(match kind {
        ObjectKind::Matrix => {
            let bytes = match entry_kind {
                _ if float_tool => recode::<Matrix<f32>>(buf, binary)?,
                Some(ObjectType::DoubleMatrix) => recode::<Matrix<f64>>(buf, binary)?,
                Some(ObjectType::CompressedMatrix) => recode::<CompressedMatrix>(buf, binary)?,
                _ => recode::<Matrix<f32>>(buf, binary)?,
            };
            (bytes, format!("Copied matrix to {out_name}"))
        }
        ObjectKind::Vector => {
            let bytes = match entry_kind {
                Some(ObjectType::DoubleVector) if !float_tool => recode::<Vector<f64>>(buf, binary)?,
                _ => recode::<Vector<f32>>(buf, binary)?,
            };
            (bytes, format!("Copied vector to {out_name}"))
        }
        ObjectKind::Model => {
            let m = KaldiModel::from_bytes(buf)?;
            (m.to_bytes(binary), format!("Written model to {out_name}"))
        }
        ObjectKind::DiagGmm => (recode::<amtool_formats::kaldi::gmm::DiagGmm>(buf, binary)?, format!("Written model to {out_name}")),
        ObjectKind::FullGmm => (
            object_to_bytes(&crate::model::kaldi::read_full_gmm(buf)?, binary),
            format!("Written model to {out_name}"),
        ),
        ObjectKind::AmDiagGmm => (recode::<amtool_formats::kaldi::gmm::AmDiagGmm>(buf, binary)?, format!("Written model to {out_name}")),
        ObjectKind::Topology => (recode::<amtool_formats::kaldi::transition::Topology>(buf, binary)?, format!("Written topology to {out_name}")),
        ObjectKind::AmAccs => (recode::<amtool_formats::kaldi::accs::AmAccs>(buf, binary)?, format!("Written stats to {out_name}")),
        ObjectKind::DiagAccs => (recode::<amtool_formats::kaldi::accs::AccumDiagGmm>(buf, binary)?, format!("Written stats to {out_name}")),
        ObjectKind::FullAccs => (recode::<amtool_formats::kaldi::accs::AccumFullGmm>(buf, binary)?, format!("Written stats to {out_name}")),
        ObjectKind::Other(_) | ObjectKind::Unknown => match entry_kind {
            // Packed matrices are the one single-object kind the model detection does not name.
            Some(ObjectType::DoublePacked) => (recode::<PackedMatrix<f64>>(buf, binary)?, format!("Copied packed matrix to {out_name}")),
            Some(ObjectType::FloatPacked) => (recode::<PackedMatrix<f32>>(buf, binary)?, format!("Copied packed matrix to {out_name}")),
            _ => {
                return Err(kind.mismatch_error(
                    "",
                    "a Kaldi object amtool copy handles (matrix, vector, GMM, model, topology, accumulators)",
                ))
            }
        },
    })
}

/// A single matrix or vector file copied with copy-matrix's or copy-vector's
/// options; the bytes to write and the log line.
fn edit_single_object(
    buf: &[u8],
    edits: &Edits,
    binary: bool,
    out_name: &str,
    tool: &str,
) -> Result<(Vec<u8>, String), String> {
    let float_tool = as_float_tool(tool);
    let fail = |e: FormatError| e.to_string();
    let (obj, what) = match tool_object_kind(tool, ObjectKind::detect(buf)) {
        ObjectKind::Matrix => (
            AnyObject::FloatMatrix(read_object(buf).map_err(fail)?),
            "matrix",
        ),
        ObjectKind::Vector => match detect_entry(buf) {
            Some(ObjectType::DoubleVector) if !float_tool => (
                AnyObject::DoubleVector(read_object(buf).map_err(fail)?),
                "vector",
            ),
            _ => (
                AnyObject::FloatVector(read_object(buf).map_err(fail)?),
                "vector",
            ),
        },
        k => {
            return Err(fail(k.mismatch_error(
                "",
                "a matrix or vector (for --scale, --apply-*, --change-dim)",
            )))
        }
    };
    let obj = edits.apply(obj, Place::File)?;
    let mut bytes = Vec::new();
    obj.write_holder(&mut bytes, binary)
        .map_err(|e| e.to_string())?;
    Ok((bytes, format!("Copied {what} to {out_name}")))
}

fn copy_single(args: &CopyArgs) -> Result<i32, String> {
    if args.compress {
        return Err("--compress=true applies to tables (ark:/scp:) only".to_string());
    }
    if !args.write_num_frames.is_empty() {
        return Err(
            "--write-num-frames option not supported when writing/reading single files.".into(),
        );
    }
    if args.sphinx_in {
        return Err("For single files, sphinx input is not yet supported.".into());
    }
    let edits = Edits::from_args(args)?;
    let in_name = printable_rx(&args.input);
    let rx = RxFilename::classify(&args.input).map_err(|e| e.0)?;
    let data = read_rxfilename(&rx).map_err(|e| e.to_string())?;
    let out_name = printable_wx(&args.output);
    let in_file = |e: FormatError| e.in_file(&in_name).to_string();
    let (bytes, log) = if !(args.copy_tm && args.copy_am) {
        let bytes =
            gmm_copy_parts(&data, args.binary, args.copy_tm, args.copy_am).map_err(in_file)?;
        (bytes, format!("Written model to {out_name}"))
    } else if !edits.is_identity() {
        edit_single_object(&data, &edits, args.binary, &out_name, &args.kaldi_tool)
            .map_err(|e| format!("{in_name}: {e}"))?
    } else {
        match copy_htk_object(&data, args.binary, &in_name, &out_name) {
            Some(r) => r.map_err(in_file)?,
            None => copy_single_object(&data, args.binary, &out_name, &args.kaldi_tool)
                .map_err(in_file)?,
        }
    };
    write_wxfilename(&args.output, |w| w.write_all(&bytes)).map_err(|e| e.to_string())?;
    crate::kaldi_log!("{log}");
    Ok(0)
}

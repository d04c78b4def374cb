//! `amtool herest` / the `HERest` shim: HTK's embedded re-estimation with
//! HERest's own single-dash options (not Kaldi's `--x=y`): every switch HTK
//! 3.4.1's HERest takes (HERest.c's switch loop, HShell's -A -C -D -S -V),
//! followed by the HMM list and data files. The list, and what amtool does
//! with each switch, is in testdata/htk/options/ (README.md there).
//! `--scorer=htk|cpu|cuda|engine` (amtool's own) picks who does the Gaussian
//! work: HTK's float arithmetic on the CPU (the default, HERest's numbers
//! exactly), or an amtool engine (CPU or GPU) for the output probabilities
//! and the mixture statistics (HERest's average log probability to 4
//! decimals; no per-component e^-10 cut-off). `--gpus=N|all` (amtool's own)
//! spreads an engine scorer's work over several GPUs.

use amtool_formats::htk::mmf::MINMIX;
use amtool_formats::htk::script::ScriptFile;
use clap::Args;

use crate::htk_train::accs::HtkUpdate;
use crate::htk_train::herest::{run as run_pass, HerestJob, Scorer};

#[derive(Debug, Args)]
pub struct HerestArgs {
    /// HERest's command line: [options] hmmList [dataFiles...], with every
    /// switch of HTK 3.4.1's HERest: -A -B -C cf -D -H mmf -I mlf -L dir
    /// -M dir -S scp -T N -V -X ext; -c f -m N -p N -s file -t f [i l]
    /// -u tmvwp -v f -w f (HShell's range checks); -d dir -x ext (HMMs in no
    /// MMF read from dir/NAME.ext), -o ext (saved with that extension);
    /// -F HTK, -G HTK. Accepted with no effect, as in HERest without
    /// adaptation transforms: -b file, -l N, -h mask, -K dir [ext], -z file.
    /// Refused as not supported: -a, -E, -J (transforms), -r (two
    /// parameterisations), -u a/s, -F/-G formats other than HTK.
    /// amtool's own: --scorer=htk|cpu|cuda|engine, and --gpus=N|all (the GPUs
    /// an engine scorer computes on, results the same to the bit for any
    /// number; ignored on the CPU).
    #[arg(
        allow_hyphen_values = true,
        trailing_var_arg = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

fn usage() -> String {
    "USAGE: HERest [options] hmmList dataFiles...\n \
     -A -B -C cf -D -H mmf -I mlf -L dir -M dir -S scp -T N -V -X ext -c f -d dir -m N \
     -o ext -p N -s file -t f [i l] -u tmvwp -v f -w f -x ext (-b -h -l -z -F -G -K: see man page)"
        .into()
}

/// HShell's `NextArg` kinds: a number (all digits, signs and dots, as
/// `NumHead` says), a switch (`-x`), or a string.
fn is_number(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_digit() || "+-.".contains(c))
        && s.parse::<f64>().is_ok()
}

fn is_string(s: &str) -> bool {
    !is_number(s) && !s.starts_with('-')
}

/// HERest's arguments read one at a time, with HShell's checks.
struct Cursor<'a> {
    args: &'a [String],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.args.get(self.i).map(String::as_str)
    }

    /// `GetStrArg` after `NextArg() == STRINGARG` (what `-x` needs: `what`).
    fn string(&mut self, opt: &str, what: &str) -> Result<String, String> {
        match self.peek() {
            Some(s) if is_string(s) => {
                self.i += 1;
                Ok(s.to_string())
            }
            _ => Err(format!("HERest: -{opt}: {what} expected")),
        }
    }

    /// An optional trailing string (the extension of `-E/-J/-K dir [ext]`).
    fn optional_string(&mut self) -> Option<String> {
        let s = self.peek().filter(|s| is_string(s))?.to_string();
        self.i += 1;
        Some(s)
    }

    /// `GetChkedFlt(min, max)`.
    fn float(&mut self, opt: &str, min: f64, max: f64) -> Result<f64, String> {
        let v = self
            .peek()
            .filter(|s| is_number(s))
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| format!("HERest: Float Arg Required for -{opt} option"))?;
        self.i += 1;
        if v < min || v > max {
            return Err(format!("HERest: -{opt} {v}: out of range [{min}, {max}]"));
        }
        Ok(v)
    }

    /// `GetChkedInt(min, max)`.
    fn int(&mut self, opt: &str, min: i64, max: i64) -> Result<i64, String> {
        let v = self
            .peek()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| format!("HERest: Integer Arg Required for -{opt} option"))?;
        self.i += 1;
        if v < min || v > max {
            return Err(format!("HERest: -{opt} {v}: out of range [{min}, {max}]"));
        }
        Ok(v)
    }
}

/// A switch HERest has and amtool cannot carry out.
fn not_supported(opt: &str, what: &str) -> String {
    format!("HERest: -{opt} ({what}) is not supported by amtool")
}

/// `-F`/`-G`: HTK's file formats (HWave's `Str2Format` names); amtool reads
/// HTK-format parameter and label files only.
fn check_format(opt: &str, fmt: &str, what: &str) -> Result<(), String> {
    const FORMATS: &[&str] = &[
        "NOHEAD", "HAUDIO", "HTK", "TIMIT", "NIST", "SCRIBE", "AIFF", "SDES1", "SUNAU8", "OGI",
        "ESPS", "ESIG", "WAV", "ALIEN",
    ];
    match fmt {
        "HTK" => Ok(()),
        f if FORMATS.contains(&f) => Err(not_supported(opt, &format!("{what} format {f}"))),
        f => Err(format!("HERest: -{opt} {f}: unknown file format")),
    }
}

/// A HERest command line split into its parts, nothing read yet.
pub struct Switches {
    pub job: HerestJob,
    /// `-S` script files, in order.
    pub scripts: Vec<String>,
    /// The HMM list and the data files given on the command line.
    pub positional: Vec<String>,
}

/// Apply one switch (`opt`, its arguments at `cur`) to `sw`, as HERest.c's
/// switch loop (and HShell's `InitShell` for -A -C -D -S -V) does.
fn apply_switch(sw: &mut Switches, opt: &str, cur: &mut Cursor) -> Result<(), String> {
    let job = &mut sw.job;
    match opt {
        // HShell.
        "A" | "D" | "V" => {} // printing only (-A is echoed by `run`)
        "C" => job
            .configs
            .push(cur.string(opt, "config file name")?.into()),
        "S" => sw.scripts.push(cur.string(opt, "script file name")?),
        // HERest.c, model update.
        "c" => job.prune.min_forward_prob = cur.float(opt, 0.0, 1000.0)?,
        "m" => job.min_egs = cur.int(opt, 0, 1000)? as u64,
        "p" => job.par_mode = Some(cur.int(opt, 0, 500)? as u32),
        "s" => job.stats = Some(cur.string(opt, "stats file name")?.into()),
        "t" => {
            let f = cur.float(opt, 0.0, 1.0e20)?;
            job.prune.init = f;
            (job.prune.inc, job.prune.limit) = match cur.peek() {
                Some(s) if is_number(s) => {
                    (cur.float(opt, 0.0, 1.0e20)?, cur.float(opt, 0.0, 1.0e20)?)
                }
                _ => (0.0, f),
            };
        }
        "u" => job.flags = HtkUpdate::parse(&cur.string(opt, "update flags")?)?,
        "v" => job.min_var = cur.float(opt, 0.0, 10.0)? as f32,
        "w" => job.mix_floor = MINMIX * cur.float(opt, 0.0, 10000.0)? as f32,
        "T" => job.trace = cur.int(opt, 0, 0o100000)? as u32,
        // Files.
        "B" => job.binary = true,
        "H" => job
            .mmfs
            .push(cur.string(opt, "HMM macro file name")?.into()),
        "I" => job.mlfs.push(cur.string(opt, "MLF file name")?.into()),
        "L" => job.lab_dir = Some(cur.string(opt, "label file directory")?.into()),
        "M" => job.out_dir = Some(cur.string(opt, "output macro file directory")?.into()),
        "X" => job.lab_ext = cur.string(opt, "label file extension")?,
        "d" => job.hmm_dir = Some(cur.string(opt, "HMM definition directory")?.into()),
        "x" => job.hmm_ext = Some(cur.string(opt, "HMM file extension")?),
        "o" => job.new_ext = Some(cur.string(opt, "HMM file extension")?),
        "F" => check_format(opt, &cur.string(opt, "data file format")?, "data file")?,
        "G" => check_format(opt, &cur.string(opt, "label file format")?, "label file")?,
        // HTK 3.4.1 reads -b's script file and never uses it.
        "b" => drop(cur.string(opt, "script file")?),
        // Speakers and transforms. Without transforms HTK sees a new speaker
        // at every file (UpdateSpkrStats), so -l never bites; -h names output
        // transforms (-u a), -K and -z where they go: no effect without them.
        "l" => drop(cur.int(opt, 0, 0o100000)?),
        "h" => drop(cur.string(opt, "speaker name pattern")?),
        "z" => drop(cur.string(opt, "output TMF file")?),
        "K" => {
            cur.string(opt, "output transform directory")?;
            cur.optional_string();
        }
        "a" => return Err(not_supported(opt, "input linear transforms")),
        "E" => return Err(not_supported(opt, "parent transforms")),
        "J" => return Err(not_supported(opt, "input transforms")),
        "r" => {
            return Err(not_supported(
                opt,
                "single-pass retraining with two parameterisations",
            ))
        }
        _ => return Err(format!("HERest: Unknown switch -{opt}\n{}", usage())),
    }
    Ok(())
}

/// HERest's switches and positional arguments (HShell: switches first, then
/// `hmmList dataFiles...`), with every switch's arguments checked. Reads no file.
pub fn parse_switches(args: &[String]) -> Result<Switches, String> {
    let mut sw = Switches {
        job: HerestJob::new(),
        scripts: Vec::new(),
        positional: Vec::new(),
    };
    let mut cur = Cursor { args, i: 0 };
    while let Some(a) = cur.peek() {
        cur.i += 1;
        if !sw.positional.is_empty() || !a.starts_with('-') || a.len() == 1 || is_number(a) {
            sw.positional.push(a.to_string());
        } else if let Some(e) = a.strip_prefix("--scorer=") {
            sw.job.scorer = parse_scorer(e)?;
        } else if let Some(n) = a.strip_prefix("--gpus=") {
            sw.job.gpus = n.parse()?;
        } else if a.len() > 2 {
            return Err(format!("HERest: Bad switch {a}; must be single letter"));
        } else {
            apply_switch(&mut sw, &a[1..], &mut cur)?;
        }
    }
    Ok(sw)
}

fn parse_scorer(e: &str) -> Result<Scorer, String> {
    use crate::engine::UseGpu;
    Ok(match e {
        "htk" => Scorer::Htk,
        "cpu" => Scorer::Engine(UseGpu::No),
        "gpu" | "cuda" => Scorer::Engine(UseGpu::Yes),
        "engine" => Scorer::Engine(UseGpu::Optional),
        _ => return Err(format!("--scorer={e}: expected htk, cpu, cuda or engine")),
    })
}

/// Parse HERest's command line into a job (reads the `-S` scripts).
pub fn parse(args: &[String]) -> Result<HerestJob, String> {
    let Switches {
        mut job,
        scripts,
        positional,
    } = parse_switches(args)?;
    let mut pos = positional.into_iter();
    job.hmm_list = pos
        .next()
        .ok_or_else(|| format!("HERest: file name of vocabulary list expected\n{}", usage()))?
        .into();
    job.data.extend(pos);
    for s in scripts {
        let sf = ScriptFile::load(&s).map_err(|e| e.to_string())?;
        job.data.extend(sf.entries().map(|e| e.physical.clone()));
    }
    if job.data.is_empty() {
        return Err("HERest: data file name expected (give files or -S script)".into());
    }
    Ok(job)
}

pub fn run(args: HerestArgs) -> i32 {
    // -A: HTK tools echo their command line first (on stdout).
    if args.args.iter().any(|a| a == "-A") {
        println!("HERest {} ", args.args.join(" "));
    }
    let job = match parse(&args.args) {
        Ok(j) => j,
        Err(e) => return super::fail(&e),
    };
    match run_pass(&job) {
        Ok(out) if !out.updated => 0,
        Ok(out) => {
            if out.report.floored_elements > 0 && job.trace & 1 != 0 {
                println!(
                    "Total {} floored variance elements in {} different mixes",
                    out.report.floored_elements, out.report.floored_mixes
                );
            }
            for w in &out.report.warnings {
                eprintln!("{w}");
            }
            if job.trace & 1 != 0 {
                if let Some(d) = &job.out_dir {
                    println!("Saving hmm's to dir {}", d.display());
                }
            }
            println!(
                "Reestimation complete - average log prob per frame = {}",
                amtool_formats::htk::cfmt::fmt_e(out.avg_log_prob())
            );
            println!(
                "     - total frames seen          = {}",
                amtool_formats::htk::cfmt::fmt_e(out.accs.total_frames as f64)
            );
            0
        }
        Err(e) => super::fail(&e.to_string()),
    }
}

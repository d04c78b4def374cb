//! `amtool herest` / the `HERest` shim: HTK's embedded re-estimation with
//! HERest's own single-dash options (not Kaldi's `--x=y`):
//! `-C config -I mlf -S scp -H mmf... -M dir -t f [i l] -u flags -v f -m N
//! -w f -c f -B -A -T N -p N -s file -L dir -X ext` followed by the HMM list
//! and data files. `--scorer=htk|cpu|cuda|engine` (amtool's own) picks who
//! does the Gaussian work: HTK's float arithmetic on the CPU (the default,
//! HERest's numbers exactly), or an amtool engine (CPU or GPU) for the output
//! probabilities and the mixture statistics (HERest's average log probability
//! to 4 decimals; no per-component e^-10 cut-off).

use std::path::PathBuf;

use amtool_formats::htk::mmf::MINMIX;
use amtool_formats::htk::script::ScriptFile;
use clap::Args;

use crate::htk_train::accs::HtkUpdate;
use crate::htk_train::fb::Pruning;
use crate::htk_train::herest::{run as run_pass, HerestJob, Scorer};

#[derive(Debug, Args)]
pub struct HerestArgs {
    /// HERest's command line: [options] hmmList [dataFiles...] (HTK single-dash options).
    #[arg(
        allow_hyphen_values = true,
        trailing_var_arg = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

fn usage() -> String {
    "USAGE: HERest [options] hmmList dataFiles...\n \
     -C cf -I mlf -S scp -H mmf -M dir -t f [i l] -u tmvw -v f -m N -w f -c f -B -A -T N"
        .into()
}

/// Parse HERest's options into a job.
pub fn parse(args: &[String]) -> Result<HerestJob, String> {
    let mut job = HerestJob {
        configs: vec![],
        mlfs: vec![],
        mmfs: vec![],
        hmm_list: PathBuf::new(),
        data: vec![],
        out_dir: None,
        prune: Pruning::default(),
        flags: HtkUpdate::default(),
        min_var: 0.0,
        mix_floor: 0.0,
        min_egs: 3,
        binary: false,
        trace: 0,
        scorer: Scorer::Htk,
        par_mode: None,
        stats: None,
        lab_dir: None,
        lab_ext: "lab".into(),
    };
    let mut scripts = Vec::new();
    let mut i = 0;
    let num = |s: Option<&String>, opt: &str| -> Result<f64, String> {
        s.and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("HERest: -{opt} needs a number"))
    };
    let mut positional = Vec::new();
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with('-') || a.len() == 1 || positional.len() > 0 {
            positional.push(a.clone());
            i += 1;
            continue;
        }
        if let Some(e) = a.strip_prefix("--scorer=") {
            job.scorer = match e {
                "htk" => Scorer::Htk,
                "cpu" => Scorer::Engine(crate::engine::UseGpu::No),
                "gpu" | "cuda" => Scorer::Engine(crate::engine::UseGpu::Yes),
                "engine" => Scorer::Engine(crate::engine::UseGpu::Optional),
                _ => return Err(format!("--scorer={e}: expected htk, cpu, cuda or engine")),
            };
            i += 1;
            continue;
        }
        let opt = &a[1..];
        let mut val = || -> Result<String, String> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("HERest: -{opt} needs an argument"))
        };
        match opt {
            "C" => job.configs.push(val()?.into()),
            "I" => job.mlfs.push(val()?.into()),
            "S" => scripts.push(val()?),
            "H" => job.mmfs.push(val()?.into()),
            "M" => job.out_dir = Some(val()?.into()),
            "u" => job.flags = HtkUpdate::parse(&val()?)?,
            "v" => job.min_var = num(Some(&val()?), "v")? as f32,
            "w" => job.mix_floor = MINMIX * num(Some(&val()?), "w")? as f32,
            "m" => job.min_egs = num(Some(&val()?), "m")? as u64,
            "c" => job.prune.min_forward_prob = num(Some(&val()?), "c")?,
            "T" => job.trace = num(Some(&val()?), "T")? as u32,
            "B" => job.binary = true,
            "A" | "V" | "D" => {}
            "t" => {
                let f = num(Some(&val()?), "t")?;
                job.prune.init = f;
                let next_num = |k: usize| args.get(k).and_then(|v| v.parse::<f64>().ok());
                if let (Some(inc), Some(lim)) = (next_num(i + 1), next_num(i + 2)) {
                    job.prune.inc = inc;
                    job.prune.limit = lim;
                    i += 2;
                } else {
                    job.prune.inc = 0.0;
                    job.prune.limit = f;
                }
            }
            "p" => job.par_mode = Some(num(Some(&val()?), "p")? as u32),
            "s" => job.stats = Some(val()?.into()),
            "L" => job.lab_dir = Some(val()?.into()),
            "X" => job.lab_ext = val()?,
            _ => return Err(format!("HERest: Unknown switch -{opt}\n{}", usage())),
        }
        i += 1;
    }
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
    if job.mmfs.is_empty() {
        return Err("HERest: no HMM set given (-H mmf)".into());
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

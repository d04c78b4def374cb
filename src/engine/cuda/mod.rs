//! The CUDA engine: NVRTC-compiled kernels from `kernels/*.cu` on padded
//! 64-state blocks, loaded at run time through cudarc's dynamic loading, so the
//! same binary runs on machines without CUDA.
//!
//! - [`CudaEngine::new`] finds libcuda and libnvrtc at run time (never
//!   panics when they are missing: it returns an error the selector turns
//!   into the CPU fallback or, with `--use-gpu=yes`, into the message).
//! - [`compile`]: kernels specialised per model shape, CUBIN cached on disk.
//! - [`select`]: which GPU (Kaldi's `SelectGpuId`).
//! - [`model`]: the model laid out on the device ([`model::CudaModel`]), the
//!   streaming of features through pinned double buffers, and the
//!   [`crate::engine::LoadedModel`] functions.
//! - [`plan`]: host-side grouping of (frame, state, weight) entries by state.
//!
//! Kernel design and measurements: `kernels/NOTES.md`.

pub mod claims;
pub mod compile;
pub mod estep16;
pub mod estep16_wg;
pub mod estep_full;
pub mod gselect;
pub mod gselect_plan;
pub mod model;
mod operands;
mod pinned;
pub use pinned::pieces_reused_unwaited;
pub mod plan;
pub mod select;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};

use crate::engine::{Engine, Gpus, LoadedModel};
use crate::model::AcousticModel;
use crate::{Error, Result};

use compile::KernelShape;

/// The kernels of one model shape.
pub(crate) struct Kernels {
    pub shape: KernelShape,
    pub block_score: CudaFunction,
    pub component_ll: CudaFunction,
    pub entry_loglike: CudaFunction,
    pub accum_stats: CudaFunction,
    pub reduce_partials: CudaFunction,
    pub sum_f64: CudaFunction,
    /// Each frame's utterance's columns of a block of state scores
    /// (`LoadedModel::state_loglikes_subset`).
    pub gather_columns: CudaFunction,
    /// The tensor-core scoring kernel (resident `block_score_tc`, or the
    /// K-chunked `block_score_tck` when `shape.kc > 0`) and its split merge,
    /// where the shape has them (`shape.tcw > 0`).
    pub block_score_tc: Option<CudaFunction>,
    /// The z operand of `block_score_tck` (`shape.kc > 0`).
    pub zfrag_plain: Option<CudaFunction>,
    pub merge_splits: Option<CudaFunction>,
    /// The FP16 E-step of one GMM (`shape.e16`).
    pub estep16: Option<Estep16Kernels>,
    /// The tensor-core E-step of one full-covariance GMM (`shape.fc16`).
    pub estep_full: Option<EstepFullKernels>,
    pub gselect: gselect::GselectKernels,
    _module: Arc<CudaModule>,
}

/// The kernels of `kernels/estep_f16.cu` and their dynamic shared memory.
pub(crate) struct Estep16Kernels {
    pub zfrag16: CudaFunction,
    pub wfrag16: CudaFunction,
    pub gll16: CudaFunction,
    pub gst16: CudaFunction,
    pub reduce16: CudaFunction,
    pub smem_ll: usize,
    pub smem_st: usize,
    /// The kernels on wgmma (`shape.wg`): they then take gll16's and
    /// gst16's places.
    pub wg: Option<estep16_wg::WgKernels>,
}

/// The kernels of `kernels/estep_fullcov.cu` and their dynamic shared memory.
pub(crate) struct EstepFullKernels {
    pub wfrag: CudaFunction,
    pub score: CudaFunction,
    pub post: CudaFunction,
    pub stats: CudaFunction,
    pub reduce: CudaFunction,
    pub smem_score: usize,
    pub smem_stats: usize,
}

/// A CUDA device with its streams: one for kernels, one for host-to-device
/// copies (so copies of the next chunk overlap the kernels of this one), one
/// for a batch's sums on their way to the host (so the next batch's kernels
/// do not wait for them).
pub struct CudaEngine {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) copy_stream: Arc<CudaStream>,
    pub(crate) download_stream: Arc<CudaStream>,
    name: String,
    cc: (i32, i32),
    /// `AMTOOL_CUDA_TC` ("0": FP32 kernels only; see `KernelShape::for_device`).
    tc: String,
    kernels: Mutex<HashMap<KernelShape, Arc<Kernels>>>,
    /// Page-locked buffers of models dropped, kept for the next model.
    pub(crate) pinned: Arc<pinned::PinnedPool>,
    /// This process's claim on the device (other processes choosing a
    /// device count it), if this engine made it.
    _claim: Option<claims::Claim>,
    /// Whether batch buffers lent go to the device piece by piece as they
    /// are gathered ([`crate::engine::upload`]): on when the process uses
    /// several devices (or partitions), whose pieces then go at once; one
    /// device alone fed that way took its pieces more slowly than its
    /// batches whole.
    uploads: std::sync::atomic::AtomicBool,
}

/// A context on device `n` and its figures, or why it refused one; with
/// `count_claims` (a choice among several devices), the other amtool
/// processes on it. Those are counted before the context is made (~0.1 s
/// of the driver's): a process that chose just before this one, its job
/// short, has let go of its claim by then.
fn open_device(
    n: usize,
    count_claims: bool,
) -> std::result::Result<(Arc<CudaContext>, select::DeviceFigures), String> {
    use cudarc::driver::result::device;
    let uuid = i32::try_from(n)
        .ok()
        .and_then(|i| device::get(i).and_then(device::get_uuid).ok())
        .map(|u| uuid_text(&u.bytes))
        .unwrap_or_else(|| format!("device{n}"));
    let ctx = CudaContext::new(n).map_err(|e| e.to_string())?;
    let name = ctx.name().map_err(|e| e.to_string())?;
    let (free, total) = ctx.mem_get_info().map_err(|e| e.to_string())?;
    let others = if count_claims {
        claims::count_others(&claims::claims_dir(), &uuid)
    } else {
        0
    };
    Ok((
        ctx,
        select::DeviceFigures {
            name,
            free,
            total,
            uuid,
            others,
        },
    ))
}

/// This process's claim on the device `figures` describe, where it chose
/// among several (`shared`).
fn claim(shared: bool, figures: &select::DeviceFigures) -> Option<claims::Claim> {
    shared.then(|| claims::Claim::make(&claims::claims_dir(), &figures.uuid))
}

/// A device UUID as `GPU-` and 32 hex digits (a file name).
fn uuid_text(bytes: &[std::ffi::c_char]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{:02x}", *b as u8)).collect();
    format!("GPU-{hex}")
}

fn driver_err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Engine(format!("CUDA: {what}: {e}"))
}

impl CudaEngine {
    /// The CUDA device [`select`] chooses, or an error saying why there is
    /// none (no driver library, no NVRTC nor cached kernels, no device, every
    /// device refusing a context, a failing driver).
    pub fn new() -> Result<Self> {
        guarded(Self::open)
    }

    /// The devices `gpus` asks for, as [`select::select_devices`] chooses
    /// them, in device order, each as `partitions` engines of its own
    /// (logical partitions of one device, for testing the splitting of
    /// work on a machine with fewer devices: `AMTOOL_PARTITIONS`).
    pub fn open_devices(gpus: Gpus, partitions: usize) -> Result<Vec<Self>> {
        guarded(move || Self::open_many(gpus, partitions))
    }

    /// [`new`](Self::new) with the tensor-core choice given here instead of
    /// by `AMTOOL_CUDA_TC` (tests and benchmarks of one kernel).
    pub fn with_tensor_cores(tc: &str) -> Result<Self> {
        let mut e = Self::new()?;
        e.tc = tc.to_string();
        Ok(e)
    }

    /// The kernel shape for a model of `dim` and `kind` on this device.
    pub(crate) fn shape_for(
        &self,
        dim: usize,
        kind: crate::model::CovKind,
        max_gaussians: usize,
    ) -> KernelShape {
        KernelShape::for_model(dim, kind, max_gaussians).for_device(self.cc, &self.tc)
    }

    fn open() -> Result<Self> {
        let count = device_count()?;
        let shared = count > 1;
        let lock = shared.then(select::SelectionLock::acquire);
        let mut passed_over = Vec::new();
        let chosen = select::select_device(
            count,
            |n| open_device(n, shared),
            |line| eprintln!("LOG (amtool) {line}"),
            &mut passed_over,
        )
        .map_err(|e| Error::Engine(format!("CUDA: {e}")))?;
        let claim = claim(shared, &chosen.figures);
        select::let_go(passed_over, lock);
        Self::on_selected(chosen, claim)
    }

    fn open_many(gpus: Gpus, partitions: usize) -> Result<Vec<Self>> {
        let count = device_count()?;
        let want = match gpus {
            Gpus::Count(n) if n > count => {
                let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                    .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})"))
                    .unwrap_or_default();
                return Err(Error::Usage(format!(
                    "--gpus={n}: this machine shows {count} GPU{}{visible}; \
                     AMTOOL_PARTITIONS=P uses each device as P logical partitions (for testing)",
                    if count == 1 { "" } else { "s" }
                )));
            }
            Gpus::Count(n) => Some(n),
            Gpus::All => None,
        };
        let shared = count > 1;
        let lock = shared.then(select::SelectionLock::acquire);
        let mut passed_over = Vec::new();
        let chosen = select::select_devices(
            count,
            want,
            |n| open_device(n, shared),
            |line| eprintln!("LOG (amtool) {line}"),
            &mut passed_over,
        )
        .map_err(|e| Error::Engine(format!("CUDA: {e}")))?;
        let claims: Vec<_> = chosen.iter().map(|c| claim(shared, &c.figures)).collect();
        select::let_go(passed_over, lock);
        if let Some(other) = chosen
            .iter()
            .find(|c| c.figures.name != chosen[0].figures.name)
        {
            eprintln!(
                "WARNING (amtool) GPUs of different models ({} and {}): results are the same \
                 to the bit only among GPUs of one model",
                chosen[0].figures.name, other.figures.name
            );
        }
        let several = chosen.len() * partitions > 1;
        let mut engines = Vec::with_capacity(chosen.len() * partitions);
        for (c, claim) in chosen.into_iter().zip(claims) {
            let index = c.index;
            engines.push(Self::on_selected(c, claim)?);
            if partitions > 1 {
                eprintln!(
                    "LOG (amtool) GPU [{index}] as {partitions} logical partitions (AMTOOL_PARTITIONS)"
                );
            }
            for _ in 1..partitions {
                let (context, figures) = open_device(index, false)
                    .map_err(|e| Error::Engine(format!("CUDA: device {index}: {e}")))?;
                engines.push(Self::on_selected(
                    select::Selected {
                        index,
                        context,
                        figures,
                    },
                    None,
                )?);
            }
        }
        for e in &engines {
            e.set_uploads(several);
        }
        Ok(engines)
    }

    /// The engine on a device whose context is open.
    fn on_selected(
        chosen: select::Selected<Arc<CudaContext>>,
        claim: Option<claims::Claim>,
    ) -> Result<Self> {
        let ctx = chosen.context;
        crate::timeline::mark("context");
        let name = chosen.figures.name.clone();
        let cc = ctx
            .compute_capability()
            .map_err(driver_err("compute capability"))?;
        eprintln!(
            "LOG (amtool) The active GPU is [{}]: {name}\t{} version {}.{}",
            chosen.index,
            chosen.figures.memory_text(),
            cc.0,
            cc.1
        );
        // Kernels come from the disk cache or from NVRTC: without either,
        // this device is of no use (and `--use-gpu=optional` takes the CPU).
        // SAFETY: this only tries to dlopen the library.
        if !compile::cached_for(cc) && !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::Engine(
                "no NVRTC library (libnvrtc.so) found; install the CUDA toolkit's NVRTC".into(),
            ));
        }
        let stream = ctx.new_stream().map_err(driver_err("stream"))?;
        let copy_stream = ctx.new_stream().map_err(driver_err("stream"))?;
        let download_stream = ctx.new_stream().map_err(driver_err("stream"))?;
        crate::timeline::mark("streams");
        let pinned = Arc::new(pinned::PinnedPool::new(ctx.clone()));
        Ok(CudaEngine {
            ctx,
            stream,
            copy_stream,
            download_stream,
            name,
            cc,
            tc: std::env::var("AMTOOL_CUDA_TC").unwrap_or_default(),
            kernels: Mutex::new(HashMap::new()),
            pinned,
            _claim: claim,
            uploads: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether batch buffers lent are sent piece by piece as they are
    /// gathered (see the field).
    pub fn uploads(&self) -> bool {
        self.uploads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Turns [`uploads`](Self::uploads) on or off (tests; `open_devices`
    /// turns it on for several devices).
    pub fn set_uploads(&self, on: bool) {
        self.uploads.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.cc
    }

    /// Streaming multiprocessors of the device.
    pub fn multiprocessors(&self) -> usize {
        use cudarc::driver::sys::CUdevice_attribute_enum::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT as SMS;
        self.ctx
            .attribute(SMS)
            .map(|n| n.max(1) as usize)
            .unwrap_or(1)
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(driver_err("memory info"))
    }

    /// The kernels for `shape`, compiled (or read from the disk cache) on first use.
    pub(crate) fn kernels(&self, shape: KernelShape) -> Result<Arc<Kernels>> {
        let mut map = self
            .kernels
            .lock()
            .map_err(|_| Error::Engine("kernel cache lock poisoned".into()))?;
        if let Some(k) = map.get(&shape) {
            return Ok(k.clone());
        }
        let ptx = compile::image_for(&shape, self.cc)?;
        crate::timeline::mark("kernel_image");
        let module = self
            .ctx
            .load_module(ptx)
            .map_err(driver_err("loading the compiled kernels"))?;
        let f = |name: &str| module.load_function(name).map_err(driver_err(name));
        let k = Arc::new(Kernels {
            shape,
            block_score: f("block_score")?,
            component_ll: f("component_ll")?,
            entry_loglike: f("entry_loglike")?,
            accum_stats: f("accum_stats")?,
            reduce_partials: f("reduce_partials")?,
            sum_f64: f("sum_f64")?,
            gather_columns: f("gather_columns")?,
            block_score_tc: match (shape.tcw, shape.kc) {
                (0, _) => None,
                (_, 0) => Some(f("block_score_tc")?),
                _ => Some(f("block_score_tck")?),
            },
            zfrag_plain: (shape.kc > 0).then(|| f("zfrag_plain")).transpose()?,
            merge_splits: (shape.tcw > 0).then(|| f("merge_splits")).transpose()?,
            estep16: if shape.e16 {
                let (smem_ll, smem_st) = estep16::smem(shape.dim);
                Some(Estep16Kernels {
                    zfrag16: f("zfrag16")?,
                    wfrag16: f("wfrag16")?,
                    gll16: f("gll16")?,
                    gst16: f("gst16")?,
                    reduce16: f("reduce16")?,
                    smem_ll,
                    smem_st,
                    wg: if shape.wg {
                        Some(estep16_wg::WgKernels::load(&f, shape.dim)?)
                    } else {
                        None
                    },
                })
            } else {
                None
            },
            estep_full: if shape.fc16 {
                let (smem_score, smem_stats) = estep_full::smem(shape.dim);
                Some(EstepFullKernels {
                    wfrag: f("fc_wfrag")?,
                    score: f("fc_score")?,
                    post: f("fc_post")?,
                    stats: f("fc_stats")?,
                    reduce: f("fc_reduce")?,
                    smem_score,
                    smem_stats,
                })
            } else {
                None
            },
            gselect: gselect::GselectKernels::load(&f, shape.dim, shape.kind)?,
            _module: module.clone(),
        });
        use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYN;
        for (func, bytes) in [
            (&k.block_score, shape.smem_score()),
            (&k.component_ll, shape.smem_score()),
            (&k.entry_loglike, shape.smem_score()),
            (&k.accum_stats, shape.smem_stats()),
        ] {
            func.set_attribute(MAX_DYN, bytes as i32)
                .map_err(driver_err("shared memory size"))?;
        }
        if let Some(e) = &k.estep16 {
            let wg =
                e.wg.as_ref()
                    .into_iter()
                    .flat_map(|w| [(&w.gllw, w.smem_ll), (&w.gstw, w.smem_st)]);
            for (func, bytes) in [(&e.gll16, e.smem_ll), (&e.gst16, e.smem_st)]
                .into_iter()
                .chain(wg)
            {
                func.set_attribute(MAX_DYN, bytes as i32)
                    .map_err(driver_err("shared memory size"))?;
            }
        }
        if let Some(e) = &k.estep_full {
            for (func, bytes) in [(&e.score, e.smem_score), (&e.stats, e.smem_stats)] {
                func.set_attribute(MAX_DYN, bytes as i32)
                    .map_err(driver_err("shared memory size"))?;
            }
        }
        if let Some(func) = &k.block_score_tc {
            func.set_attribute(MAX_DYN, shape.smem_tc() as i32)
                .map_err(driver_err("shared memory size"))?;
        }
        map.insert(shape, k.clone());
        crate::timeline::mark("module_load");
        Ok(k)
    }
}

/// Runs `open` (which loads CUDA) so that a missing GPU is never a crash:
/// cudarc panics when a library or symbol is missing; callers probe first,
/// and whatever slips through is caught here.
fn guarded<T>(open: impl FnOnce() -> Result<T> + std::panic::UnwindSafe) -> Result<T> {
    std::panic::catch_unwind(open).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".into());
        Err(Error::Engine(format!("CUDA could not be loaded: {msg}")))
    })
}

/// Visible CUDA devices (at least one), or why there are none.
fn device_count() -> Result<usize> {
    // SAFETY: this only tries to dlopen the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::Engine(
            "no CUDA driver library (libcuda.so) found".into(),
        ));
    }
    crate::timeline::mark("cuda_libraries");
    let count = CudaContext::device_count().map_err(driver_err("cannot count devices"))?;
    crate::timeline::mark("cu_init");
    if count < 1 {
        return Err(Error::Engine("no CUDA device found".into()));
    }
    Ok(count as usize)
}

impl Engine for CudaEngine {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device(&self) -> String {
        self.name.clone()
    }

    fn load<'e>(&'e self, model: &AcousticModel) -> Result<Box<dyn LoadedModel + 'e>> {
        Ok(Box::new(model::CudaModel::new(self, model)?))
    }
}

/// Whether GPU tests must run (`AMTOOL_REQUIRE_GPU=1`, set on the GPU machine).
pub fn gpu_required() -> bool {
    std::env::var("AMTOOL_REQUIRE_GPU")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// For GPU tests: the engine, or `None` after printing `skipped: no CUDA
/// device` — a panic instead when [`gpu_required`].
pub fn engine_for_tests() -> Option<CudaEngine> {
    match CudaEngine::new() {
        Ok(e) => Some(e),
        Err(e) if gpu_required() => panic!("AMTOOL_REQUIRE_GPU=1 but no CUDA engine: {e}"),
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            None
        }
    }
}

/// For GPU tests: `partitions` engines on one GPU as a multi-engine
/// (logical partitions of the device [`select`] chooses), or `None` after
/// printing `skipped: no CUDA device` — a panic instead when
/// [`gpu_required`].
pub fn partitions_for_tests(partitions: usize) -> Option<crate::engine::MultiEngine> {
    let opened = CudaEngine::open_devices(Gpus::Count(1), partitions).and_then(|v| {
        let parts = v
            .into_iter()
            .map(|e| Box::new(e) as Box<dyn Engine>)
            .collect();
        crate::engine::MultiEngine::new(parts)
    });
    match opened {
        Ok(e) => Some(e),
        Err(e) if gpu_required() => panic!("AMTOOL_REQUIRE_GPU=1 but no CUDA engine: {e}"),
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_engine_opens_or_says_why_not() {
        match CudaEngine::new() {
            Ok(e) => {
                assert_eq!(e.name(), "cuda");
                assert!(!e.device().is_empty());
            }
            Err(e) => {
                assert!(!gpu_required(), "AMTOOL_REQUIRE_GPU=1 but: {e}");
                assert!(
                    e.to_string().contains("CUDA") || e.to_string().contains("NVRTC"),
                    "{e}"
                );
                println!("skipped: no CUDA device ({e})");
            }
        }
    }
}

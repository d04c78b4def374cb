// Experiment: move a Kaldi-like feature ark (page cache, mmap) to N devices.
// MODE=batch: 42 MB write-combined batches gathered by all threads, one copy each (main's way)
// MODE=ring:  each thread owns PIECES pinned pieces of PIECE_KB, copies P bytes of a batch
//             into one and enqueues its copy at once (two devices' batches interleaved).
use cudarc::driver::sys;
use cudarc::driver::CudaContext;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

const D: usize = 40;
const UTT: usize = 1000;
const HDR: usize = 26;

fn env(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn ck(r: sys::CUresult, what: &str) {
    if r != sys::CUresult::CUDA_SUCCESS {
        panic!("{what}: {r:?}");
    }
}

fn make_file(path: &str, utts: usize) {
    use std::io::Write;
    if std::fs::metadata(path).map(|m| m.len() as usize).ok() == Some(utts * (HDR + UTT * D * 4)) {
        return;
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut s = 12345u64;
    let mut buf = vec![0u8; UTT * D * 4];
    for u in 0..utts {
        let mut h = format!("utt{u:07} ").into_bytes();
        h.extend_from_slice(b"\0BFM \x04");
        h.extend_from_slice(&(UTT as i32).to_le_bytes());
        h.push(4);
        h.extend_from_slice(&(D as i32).to_le_bytes());
        assert_eq!(h.len(), HDR);
        f.write_all(&h).unwrap();
        for c in buf.chunks_mut(4) {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0;
            c.copy_from_slice(&v.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
}

/// Copy rows of floats from unaligned bytes to dst, returning column maxima.
fn copy_max(src: &[u8], dst: &mut [f32], nt: bool) -> [f32; D] {
    let mut m = [0f32; D];
    let n = dst.len();
    assert_eq!(src.len(), n * 4);
    {
        #[cfg(target_arch = "x86_64")]
        unsafe {
            use std::arch::x86_64::*;
            let p = dst.as_mut_ptr();
            let mut i = 0;
            // dst aligned to 16 for our offsets (multiples of D floats = 160 B)
            while i + 4 <= n {
                let v = _mm_loadu_ps(src.as_ptr().add(i * 4) as *const f32);
                if nt {
                    _mm_stream_ps(p.add(i), v);
                } else {
                    _mm_storeu_ps(p.add(i), v);
                }
                let a = _mm_andnot_ps(_mm_set1_ps(-0.0), v);
                let k = i % D;
                let mm = _mm_loadu_ps(m.as_ptr().add(k));
                _mm_storeu_ps(m.as_mut_ptr().add(k), _mm_max_ps(mm, a));
                i += 4;
            }
            return m;
        }
    }
    for (r, (s, d)) in src.chunks_exact(D * 4).zip(dst.chunks_exact_mut(D)).enumerate() {
        let _ = r;
        for k in 0..D {
            let v = f32::from_le_bytes([s[4 * k], s[4 * k + 1], s[4 * k + 2], s[4 * k + 3]]);
            d[k] = v;
            m[k] = m[k].max(v.abs());
        }
    }
    m
}

struct Dev {
    #[allow(dead_code)]
    ctx: Arc<CudaContext>,
    stream: sys::CUstream,
    buf: sys::CUdeviceptr,
    cap: usize,
}

fn host_alloc(bytes: usize, flags: u32) -> *mut f32 {
    let mut p = std::ptr::null_mut();
    unsafe { ck(sys::cuMemHostAlloc(&mut p, bytes, flags), "hostalloc") };
    p as *mut f32
}

fn new_event() -> sys::CUevent {
    let mut e = std::ptr::null_mut();
    unsafe {
        ck(
            sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32),
            "event",
        )
    };
    e
}

fn tasks_of(nb: usize, ndev: usize, utts: usize, batch_utts: usize, piece_floats: usize, il: bool) -> Vec<(usize, usize, usize)> {
    let mut tasks = vec![];
    for pair in (0..nb).step_by(ndev) {
        let per: Vec<Vec<(usize, usize, usize)>> = (pair..(pair + ndev).min(nb))
            .map(|b| {
                let n = ((b + 1) * batch_utts).min(utts) * UTT * D - b * batch_utts * UTT * D;
                (0..n)
                    .step_by(piece_floats)
                    .map(|a| (b, a, piece_floats.min(n - a)))
                    .collect()
            })
            .collect();
        if il {
            let most = per.iter().map(|v| v.len()).max().unwrap_or(0);
            for i in 0..most {
                for v in &per {
                    if let Some(t) = v.get(i) {
                        tasks.push(*t);
                    }
                }
            }
        } else {
            for v in per {
                tasks.extend(v);
            }
        }
    }
    tasks
}

fn fill<'a>(src: &impl Fn(usize) -> &'a [u8], piece: &mut [f32], b: usize, a: usize, n: usize, batch_utts: usize, nt: bool) -> f32 {
    let f0 = b * batch_utts * UTT + a / D;
    let mut done = 0;
    let mut msum = 0f32;
    while done < n {
        let f = f0 + done / D;
        let (u, r) = (f / UTT, f % UTT);
        let rows = (UTT - r).min((n - done) / D);
        let s = &src(u)[r * D * 4..(r + rows) * D * 4];
        let m = copy_max(s, &mut piece[done..done + rows * D], nt);
        msum += m[0];
        done += rows * D;
    }
    msum
}

struct SendPtr<T>(T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
unsafe impl Sync for Dev {}
unsafe impl Send for Dev {}

fn main() {
    let path = std::env::var("FILE").unwrap_or("/tmp/ring2.ark".into());
    let utts = env("UTTS", 3125);
    make_file(&path, utts);
    let ndev = env("DEVS", 2);
    let reps = env("REPS", 5);
    let mode = std::env::var("MODE").unwrap_or("batch".into());
    let threads = env("THREADS", 24);
    let batch_utts = env("BATCH_UTTS", 262);
    let piece_floats = env("PIECE_KB", 2048) * 1024 / 4 / D * D;
    let npieces = env("PIECES", 2);
    let nt = env("NT", 0) == 1;
    let wc = env("WC", 0) == 1;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let batch_floats = batch_utts * UTT * D;
    let devs: Vec<Dev> = (0..ndev)
        .map(|i| {
            let ctx = CudaContext::new(i).unwrap();
            ctx.bind_to_thread().unwrap();
            let mut s = std::ptr::null_mut();
            unsafe { ck(sys::cuStreamCreate(&mut s, 1), "stream") };
            let cap = batch_floats * 3;
            let mut p = 0;
            unsafe { ck(sys::cuMemAlloc_v2(&mut p, cap * 4), "alloc") };
            Dev { ctx, stream: s, buf: p, cap }
        })
        .collect();
    let wcflag = if wc { sys::CU_MEMHOSTALLOC_WRITECOMBINED } else { 0 };
    let flags = sys::CU_MEMHOSTALLOC_PORTABLE | wcflag;
    let nb = utts.div_ceil(batch_utts);
    // batch buffers (batch mode): 3 per device
    let nslots = if mode == "early" { nb.div_ceil(ndev) * ndev } else { 3 * ndev };
    let bbufs: Vec<SendPtr<*mut f32>> = if mode == "batch" || mode == "early" {
        (0..nslots)
            .map(|_| SendPtr(host_alloc(batch_floats * 4, flags)))
            .collect()
    } else {
        vec![]
    };
    let bev: Vec<SendPtr<sys::CUevent>> = (0..3 * ndev)
        .map(|slot| {
            devs[slot % ndev].ctx.bind_to_thread().unwrap();
            SendPtr(new_event())
        })
        .collect();
    // ring pieces: per thread npieces
    let pieces: Vec<SendPtr<*mut f32>> = (0..threads * npieces)
        .map(|_| SendPtr(host_alloc(piece_floats * 4, flags)))
        .collect();
    let pev: Vec<Vec<SendPtr<sys::CUevent>>> = (0..threads * npieces)
        .map(|_| {
            devs.iter()
                .map(|d| {
                    d.ctx.bind_to_thread().unwrap();
                    SendPtr(new_event())
                })
                .collect()
        })
        .collect();
    let pused: Vec<AtomicUsize> = (0..threads * npieces).map(|_| AtomicUsize::new(0)).collect();
    let mut times = vec![];
    for rep in 0..reps {
        let file = std::fs::File::open(&path).unwrap();
        let t0 = Instant::now();
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let src = |u: usize| -> &[u8] {
            let o = u * (HDR + UTT * D * 4) + HDR;
            &map[o..o + UTT * D * 4]
        };
        let mut maxsum = 0f32;
        if mode == "batch" {
            for b in 0..nb {
                let dev = b % ndev;
                let slot = (b / ndev) % 3 * ndev + dev;
                unsafe { ck(sys::cuEventSynchronize(bev[slot].0), "sync") };
                let u0 = b * batch_utts;
                let u1 = (u0 + batch_utts).min(utts);
                let base = SendPtr(bbufs[slot].0);
                let ms: Vec<[f32; D]> = pool.install(|| {
                    (u0..u1)
                        .into_par_iter()
                        .map(|u| {
                            let b = &base;
                            let dst = unsafe {
                                std::slice::from_raw_parts_mut(b.0.add((u - u0) * UTT * D), UTT * D)
                            };
                            copy_max(src(u), dst, nt)
                        })
                        .collect()
                });
                maxsum += ms.iter().map(|m| m[0]).sum::<f32>();
                let dv = &devs[dev];
                dv.ctx.bind_to_thread().unwrap();
                let off = (b / ndev) % 3 * batch_floats;
                unsafe {
                    ck(
                        sys::cuMemcpyHtoDAsync_v2(
                            dv.buf + (off * 4) as u64,
                            base.0 as *const _,
                            (u1 - u0) * UTT * D * 4,
                            dv.stream,
                        ),
                        "copy",
                    );
                    ck(sys::cuEventRecord(bev[slot].0, dv.stream), "rec");
                }
            }
        } else if mode == "early" {
            let il = env("IL", 0) == 1;
            let tasks = tasks_of(nb, ndev, utts, batch_utts, piece_floats, il);
            let next = AtomicUsize::new(0);
            let tasks = &tasks;
            let ms: Vec<f32> = pool.install(|| {
                (0..threads)
                    .into_par_iter()
                    .map(|_| {
                        let mut msum = 0f32;
                        let mut bound = usize::MAX;
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(b, a, n)) = tasks.get(i) else { break };
                            let dev = b % ndev;
                            let dv = &devs[dev];
                            if bound != dev {
                                dv.ctx.bind_to_thread().unwrap();
                                bound = dev;
                            }
                            let piece = unsafe { std::slice::from_raw_parts_mut(bbufs[b].0.add(a), n) };
                            msum += fill(&src, piece, b, a, n, batch_utts, nt);
                            let off = (b / ndev) * batch_floats + a;
                            assert!(off + n <= dv.cap * 2);
                            unsafe {
                                ck(
                                    sys::cuMemcpyHtoDAsync_v2(
                                        dv.buf + ((off % dv.cap) * 4) as u64,
                                        piece.as_ptr() as *const _,
                                        n * 4,
                                        dv.stream,
                                    ),
                                    "copy",
                                );
                            }
                        }
                        msum
                    })
                    .collect()
            });
            maxsum += ms.iter().sum::<f32>();
        } else {
            // tasks: (batch, float offset in batch, floats), batches of both devices interleaved
            let all_tasks = tasks_of(nb, ndev, utts, batch_utts, piece_floats, env("IL", 1) == 1);
            // BARRIER=1: one pool job a pair of batches (amtool's gathers).
            let groups: Vec<Vec<(usize, usize, usize)>> = if env("BARRIER", 0) == 1 {
                let mut g: Vec<Vec<(usize, usize, usize)>> = Vec::new();
                for t in &all_tasks {
                    let pair = t.0 / ndev;
                    if g.last().map_or(true, |l| l[0].0 / ndev != pair) {
                        g.push(Vec::new());
                    }
                    g.last_mut().unwrap().push(*t);
                }
                g
            } else {
                vec![all_tasks]
            };
            for tasks in &groups {
            let next = AtomicUsize::new(0);
            let ms: Vec<f32> = pool.install(|| {
                (0..threads)
                    .into_par_iter()
                    .map(|t| {
                        let mut k = 0usize;
                        let mut msum = 0f32;
                        let mut bound = usize::MAX;
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(b, a, n)) = tasks.get(i) else { break };
                            let dev = b % ndev;
                            let dv = &devs[dev];
                            if bound != dev {
                                dv.ctx.bind_to_thread().unwrap();
                                bound = dev;
                            }
                            let pi = t * npieces + k % npieces;
                            k += 1;
                            let last = pused[pi].swap(dev + 1, Ordering::Relaxed);
                            if last > 0 {
                                unsafe { ck(sys::cuEventSynchronize(pev[pi][last - 1].0), "sync") };
                            }
                            let piece = unsafe { std::slice::from_raw_parts_mut(pieces[pi].0, n) };
                            msum += fill(&src, piece, b, a, n, batch_utts, nt);
                            let off = ((b / ndev) % 3) * batch_floats + a;
                            assert!(off + n <= dv.cap);
                            unsafe {
                                ck(
                                    sys::cuMemcpyHtoDAsync_v2(
                                        dv.buf + (off * 4) as u64,
                                        piece.as_ptr() as *const _,
                                        n * 4,
                                        dv.stream,
                                    ),
                                    "copy",
                                );
                                ck(sys::cuEventRecord(pev[pi][dev].0, dv.stream), "rec");
                            }
                        }
                        msum
                    })
                    .collect()
            });
            maxsum += ms.iter().sum::<f32>();
            }
        }
        for dv in &devs {
            dv.ctx.bind_to_thread().unwrap();
            unsafe { ck(sys::cuStreamSynchronize(dv.stream), "ssync") };
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        for p in &pused {
            p.store(0, Ordering::Relaxed);
        }
        drop(map);
        eprintln!("rep {rep}: {ms:.2} ms (maxsum {maxsum})");
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let gb = (utts * UTT * D * 4) as f64 / 1e9;
    let med = times[times.len() / 2];
    println!(
        "MODE={mode} DEVS={ndev} THREADS={threads} PIECE_KB={} PIECES={npieces} NT={} WC={} median {med:.2} ms {:.1} GB/s min {:.2}",
        piece_floats * 4 / 1024,
        nt as u8,
        wc as u8,
        gb / med * 1e3,
        times[0]
    );
}

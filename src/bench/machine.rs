//! What `primd bench` learns about the machine: the CPU's name (x86's model name, an ARM
//! board and core), the instruction-set extensions the kernels may use, the process's
//! memory (procfs), dropping a file's cached pages for a cold page-in, and the kernels
//! this machine runs ([`kernel_report`]).

use std::path::Path;

use super::report::Features;

/// The kernels this machine runs, for logs and failure reports: primd's 1-bit scan and
/// int8 rerank kernels, primd's int8 matmul kernels (the default embedder's linears),
/// primd's posting decoding and BM25 scoring kernels, and the instruction sets tract
/// picks its f32 kernels from (attention, LayerNorm, GELU, and every matmul of the fp32
/// model). Two machines that differ here may round differently in the last bits, which
/// is why rankings recorded on one are compared with tolerances on another. Here, above
/// every kernel it names (`primd run` logs it at start, `primd bench` reports it).
pub fn kernel_report() -> String {
    format!(
        "scan/rerank {}, int8 matmul {}, BM25 postings {}, tract f32 {:?} ({})",
        crate::scan::kernel_name(),
        crate::qgemm::kernel_name(),
        crate::lexical::kernel_name(),
        tract_linalg::isa::native(),
        tract_linalg::isa::native().nickname()
    )
}

/// Asks the kernel to drop `path`'s cached pages, so the next open reads it from
/// storage; true if it accepted. Pages mapped by a running daemon stay (the kernel
/// never drops mapped pages this way), so this costs a running daemon nothing.
pub(super) fn drop_cached_pages(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let Ok(file) = std::fs::File::open(path) else {
            return false;
        };
        // SAFETY: `file` is open for the duration of the call; posix_fadvise only reads
        // its arguments and touches no memory of ours.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// A `Vm*` line of /proc/self/status, in KiB (None where there is no procfs).
pub(super) fn vm_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The CPU's name: x86's "model name"; on ARM the board ("Model", e.g. "Raspberry Pi 4
/// Model B") and the core, named from its "CPU part".
pub(super) fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    if let Some(m) = field("model name") {
        return m;
    }
    let core = field("CPU part").map(|part| {
        let name = match part.as_str() {
            "0xd03" => "Cortex-A53",
            "0xd04" => "Cortex-A35",
            "0xd05" => "Cortex-A55",
            "0xd07" => "Cortex-A57",
            "0xd08" => "Cortex-A72",
            "0xd09" => "Cortex-A73",
            "0xd0a" => "Cortex-A75",
            "0xd0b" => "Cortex-A76",
            "0xd0c" => "Neoverse-N1",
            "0xd0d" => "Cortex-A77",
            "0xd41" => "Cortex-A78",
            "0xd42" => "Cortex-A78AE",
            "0xd40" => "Neoverse-V1",
            "0xd46" => "Cortex-A510",
            "0xd47" => "Cortex-A710",
            "0xd49" => "Neoverse-N2",
            "0xd4f" => "Neoverse-V2",
            _ => "",
        };
        if name.is_empty() {
            format!("CPU part {part}")
        } else {
            name.to_string()
        }
    });
    let board = field("Model").or_else(|| {
        std::fs::read_to_string("/proc/device-tree/model")
            .ok()
            .map(|s| s.trim_end_matches('\0').trim().to_string())
    });
    match (board, core) {
        (Some(b), Some(c)) => format!("{b} ({c})"),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => "unknown".into(),
    }
}

pub(super) fn features() -> Features {
    #[allow(unused_mut)]
    let mut f = Features::default();
    #[cfg(target_arch = "x86_64")]
    {
        f.avx2 = std::arch::is_x86_feature_detected!("avx2");
        f.fma = std::arch::is_x86_feature_detected!("fma");
        f.avxvnni = std::arch::is_x86_feature_detected!("avxvnni");
        f.avx512vnni = std::arch::is_x86_feature_detected!("avx512vnni");
    }
    #[cfg(target_arch = "aarch64")]
    {
        f.neon = std::arch::is_aarch64_feature_detected!("neon");
        f.dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
        f.i8mm = std::arch::is_aarch64_feature_detected!("i8mm");
        f.fp16 = std::arch::is_aarch64_feature_detected!("fp16");
    }
    f
}

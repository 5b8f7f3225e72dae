//! Allocator settings that must be in the environment when the process
//! starts.
//!
//! Both allocators an apiforge program is likely to run on read their
//! tuning from environment variables once, while the process loads, and the
//! workspace forbids the `unsafe` calls (`mallopt`, `mi_option_set`) that
//! could change them later. [`tune`] therefore re-executes the program once
//! with the variables below added, each only when it is not set already
//! (which is also what stops the second execution from repeating the
//! first). Each allocator ignores the other's variable.
//!
//! - [`GLIBC_ARENAS`] (glibc's malloc, the default for a Rust program):
//!   glibc gives a process up to eight arenas per core and lets each thread
//!   settle on one; memory freed into one arena is not reused by threads of
//!   another. An API server does exactly that at scale: the storage reads a
//!   whole collection on a blocking thread, the watch cache builds its
//!   objects on a worker thread, and the freed values stay resident. Set to
//!   the number of cores: with 50,000 cached objects of ~1 KiB, RSS after
//!   loading the cache went from 167 MiB to 136 MiB.
//! - [`MIMALLOC_PURGE_DELAY`] (mimalloc, which the `apiforge` binary
//!   uses): how long freed memory stays resident before it is returned to
//!   the system. mimalloc's default (1 s) only takes effect when the
//!   process allocates again, so the garbage of one large list stayed
//!   resident while the server was idle. Set to 0: returned at once.
//!   `apiforge-bench --scenario memory` measures both at 100,000 objects
//!   (docs/performance.md).
//! - [`MIMALLOC_ALLOW_THP`] (mimalloc): whether its memory may use
//!   transparent huge pages. With memory returned at once, every reuse
//!   faults it in again, and a 2 MiB huge page is zeroed each time: start-up
//!   to `/readyz` spent over half its time in the kernel clearing pages
//!   (117 ms instead of 54 ms). Set to 0: ordinary 4 KiB pages.
//!
//! Other platforms: nothing happens.

/// The variable glibc's malloc reads for its arena limit.
pub const GLIBC_ARENAS: &str = "MALLOC_ARENA_MAX";

/// The variable mimalloc reads for how long freed memory stays resident, in
/// milliseconds.
pub const MIMALLOC_PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";

/// The variable mimalloc reads for whether it may use transparent huge
/// pages.
pub const MIMALLOC_ALLOW_THP: &str = "MIMALLOC_ALLOW_THP";

/// The settings [`tune`] adds, as (variable, value), given the number of
/// cores; variables already in the environment are left out.
#[cfg(target_os = "linux")]
fn missing_settings(cores: usize) -> Vec<(&'static str, String)> {
    [
        (GLIBC_ARENAS, cores.max(2).to_string()),
        (MIMALLOC_PURGE_DELAY, "0".to_string()),
        (MIMALLOC_ALLOW_THP, "0".to_string()),
    ]
    .into_iter()
    .filter(|(name, _)| std::env::var_os(name).is_none())
    .collect()
}

/// Re-executes the current program with the allocator settings above added
/// to its environment, unless all of them are set already. Call it first
/// thing in `main`, before any thread is started; it returns only when
/// nothing was missing, on platforms other than Linux, or when
/// re-executing failed (then the program goes on with the allocator's
/// defaults, after a warning on stderr).
pub fn tune() {
    #[cfg(target_os = "linux")]
    reexec_tuned();
}

#[cfg(target_os = "linux")]
fn reexec_tuned() {
    use std::os::unix::process::CommandExt;

    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let missing = missing_settings(cores);
    if missing.is_empty() {
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("warning: allocator settings not applied: cannot find the executable: {e}");
            return;
        }
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    let error = command.args(args).envs(missing).exec();
    eprintln!("warning: allocator settings not applied: re-executing failed: {error}");
}

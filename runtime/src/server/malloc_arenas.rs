//! How many heaps (arenas) glibc's allocator keeps.
//!
//! glibc gives a process up to eight arenas per core and lets each thread
//! settle on one. Memory a thread frees goes back to the arena it came
//! from, where allocations running on threads of other arenas cannot reuse
//! it. An API server does exactly that at scale: the storage reads a whole
//! collection on a blocking thread, the watch cache builds its objects from
//! it on a worker thread, and the freed values stay behind as holes between
//! long-lived allocations that resident memory keeps counting. With 50,000
//! cached objects of ~1 KiB the server's RSS after loading its cache was
//! 167 MiB with glibc's default and 136 MiB with two arenas
//! (`apiforge-bench --scenario memory` measures this at 100,000 objects).
//!
//! glibc reads `MALLOC_ARENA_MAX` once, when the process starts, so
//! [`limit_to_cores`] re-executes the program with it set to the number of
//! cores (at least two): as many arenas as threads that can run at once.
//! A `MALLOC_ARENA_MAX` already in the environment is left alone, which is
//! also what stops the second execution from repeating the first. Other
//! platforms and allocators: nothing happens.

/// The variable glibc reads.
pub const VARIABLE: &str = "MALLOC_ARENA_MAX";

/// Re-executes the current program with [`VARIABLE`] set to the number of
/// cores, unless it is set already. Call it first thing in `main`, before
/// any thread is started; it returns only when the program is already
/// limited, on platforms without glibc, or when re-executing failed (then
/// the program goes on with glibc's default, after a warning on stderr).
pub fn limit_to_cores() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    reexec_limited();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn reexec_limited() {
    use std::os::unix::process::CommandExt;

    if std::env::var_os(VARIABLE).is_some() {
        return;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("warning: not limiting malloc arenas: cannot find the executable: {e}");
            return;
        }
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    let error = command.args(args).env(VARIABLE, cores.to_string()).exec();
    eprintln!("warning: not limiting malloc arenas: re-executing failed: {error}");
}

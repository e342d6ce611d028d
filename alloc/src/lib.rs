//! The allocator of every hookflow binary, and giving memory back to the system when a large allocation is done.
//!
//! mimalloc: the many small, short-lived allocations of requests and JSON cost less than with the system allocator
//! (`hookflow-bench capture`: +8% durable captures/s). It hands freed memory back to the system only after a purge
//! delay, and only when a later allocation or free gets round to it: a server that goes quiet keeps what it freed
//! last. After one password hash (argon2's 19 MiB) an idle server held 16 MiB more than it used, for good.
//! [`release_freed_memory`] gives it back at once; it is for the end of rare, large work, not for hot paths
//! (purging every free at once cost 7% of captures/s).

/// The global allocator: `#[global_allocator] static ALLOCATOR: hookflow_alloc::Allocator = hookflow_alloc::Allocator;`
pub use mimalloc::MiMalloc as Allocator;

/// Hands the memory freed so far back to the operating system now, rather than after a purge delay the process may
/// never reach: the calling thread's free pages, and every range any thread gave back to mimalloc's arenas (a large
/// block is one such range). Free pages still cached by other threads' heaps stay. Costs a pass over the calling
/// thread's heap and one `madvise` per freed range: call it after rare work that freed megabytes, on the thread
/// that did it (a password hash), never per request. Does nothing under `MIMALLOC_PURGE_DELAY=0` (everything is
/// purged at once anyway); under `MIMALLOC_PURGE_DECOMMITS=0` the kernel takes the pages back only when it needs
/// them. Harmless where mimalloc is not the global allocator (tests): its heaps are then empty.
pub fn release_freed_memory() {
    // SAFETY: `mi_collect` takes no arguments but a flag, touches only mimalloc's own state (its arenas' purges are
    // claimed through atomic bitmaps behind a try-lock), and may be called from any thread while others allocate.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod tests {
    #[global_allocator]
    static ALLOCATOR: super::Allocator = super::Allocator;

    /// Anonymous memory this process has resident, in KiB.
    fn resident_anonymous_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).expect("an RssAnon line");
        line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("a number of KiB")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn memory_freed_by_large_work_goes_back_to_the_system() {
        const SIZE: usize = 24 << 20;
        if let Some((name, _)) = std::env::vars().find(|(name, _)| name.starts_with("MIMALLOC_PURGE")) {
            eprintln!("skipped: {name} changes when mimalloc purges");
            return;
        }
        let before = resident_anonymous_kib();
        let mut work = vec![0u8; SIZE];
        // Touched as argon2 touches its blocks, so every page is resident.
        for byte in work.iter_mut().step_by(4096) {
            *byte = 1;
        }
        assert!(std::hint::black_box(&work).iter().step_by(4096).any(|b| *b != 0));
        let touched = resident_anonymous_kib();
        assert!(touched >= before + 20 * 1024, "the work is resident: {before} KiB, then {touched} KiB");
        drop(work);
        let freed = resident_anonymous_kib();
        super::release_freed_memory();
        let released = resident_anonymous_kib();
        assert!(
            released + 20 * 1024 <= freed,
            "freed but resident: {freed} KiB; after the release {released} KiB (at least 20 MiB less expected)"
        );
    }
}

//! "No allocation per partial": once warm, embedding an English partial (tokenizer,
//! int8 encoder, pooling) allocates nothing. Its own test binary, because it counts
//! every allocation of the process with a global allocator.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Precision};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_embed_of_an_english_partial_allocates_nothing() {
    let opts = EmbedderOptions {
        precision: Precision::Int8,
        threads: 1,
    };
    let mut e = Embedder::load(&common::model_dir(), &opts).unwrap();
    let mut out = [0.0f32; DIM];
    let longest = "what is the name of the river that flows through the capital city of France";
    e.embed_into(longest, &mut out).unwrap(); // warm-up: buffers grow to this length
    for partial in [
        "what is",
        "what is the name of the river",
        "What's the river, e.g. Seine?",
    ] {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        e.embed_into(partial, &mut out).unwrap();
        let n = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(n, 0, "{n} allocations embedding {partial:?}");
    }
}

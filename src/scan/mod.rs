//! Search kernels (interim scalar version; replaced by per-architecture kernels).

use heapless::binary_heap::{BinaryHeap, Max};

pub const MAX_K: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    pub index: u32,
    pub distance: u32,
}

pub struct TopK {
    heap: BinaryHeap<(u32, u32), Max, MAX_K>,
    k: usize,
}

impl Default for TopK {
    fn default() -> Self {
        Self::new()
    }
}

impl TopK {
    pub fn new() -> Self {
        TopK {
            heap: BinaryHeap::new(),
            k: MAX_K,
        }
    }
    pub fn reset(&mut self, k: usize) {
        self.k = k.clamp(1, MAX_K);
        self.heap.clear();
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn threshold(&self) -> u32 {
        if self.heap.len() < self.k {
            u32::MAX
        } else {
            self.heap.peek().map_or(u32::MAX, |t| t.0)
        }
    }
    pub fn push(&mut self, distance: u32, index: u32) {
        if self.heap.len() < self.k {
            let _ = self.heap.push((distance, index));
        } else if let Some(&top) = self.heap.peek()
            && (distance, index) < top
        {
            let _ = self.heap.pop();
            let _ = self.heap.push((distance, index));
        }
    }
    pub fn drain_sorted(&mut self, out: &mut heapless::Vec<Neighbor, MAX_K>) {
        out.clear();
        while let Some((distance, index)) = self.heap.pop() {
            let _ = out.push(Neighbor { index, distance });
        }
        out.reverse();
    }
}

pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

pub fn hamming_top_k(codes: &[u8], query: &[u8], top: &mut TopK) {
    if query.is_empty() {
        return;
    }
    for (i, code) in codes.chunks_exact(query.len()).enumerate() {
        let d = hamming(code, query);
        if d <= top.threshold() {
            top.push(d, i as u32);
        }
    }
}

pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(x, y)| *x as i32 * *y as i32).sum()
}

pub fn kernel_name() -> &'static str {
    "scalar"
}

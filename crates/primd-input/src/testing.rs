//! Test support of the whole workspace: one seeded random generator ([`Rng`]), here in
//! the lowest crate so that its own tests (the fuzz targets' mutations) and primd's
//! (re-exported as `primd::testing::Rng`) draw from the same one. Not an API.

/// xorshift64*: a tiny seeded generator, so tests and benches need no extra crate and
/// give the same inputs on every machine and run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits (an endless generator: no `Option`, hence no `Iterator`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform-ish in `0..n` (`n > 0`), for indexing.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `(0, 1)`.
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    /// `n` values uniform in `[-amp, amp)`.
    pub fn f32s(&mut self, n: usize, amp: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * amp)
            .collect()
    }

    /// `n` uniform bytes as `i8`.
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.next() >> 56) as i8).collect()
    }

    /// `n` bytes drawn from `alphabet`.
    pub fn bytes(&mut self, n: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..n)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }
}
